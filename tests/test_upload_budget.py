"""The app's memory budget for uploads: a scenario's decoded audio is booked before it is decoded, refused
past one upload's limit or the app's total (the session keeps what it had), and given back when the session
opens something else or ends."""
from __future__ import annotations

import pytest

from demo.open import library, views
from demo.open.upload_budget import MB, UploadBudget
from kame_core.scenario import ScenarioError, load_scenario
from kame_core.settings import UploadLimits
from kame_core.testing.sessions import silent_scenario


@pytest.fixture(scope="module")
def silence(tmp_path_factory):
    folder = tmp_path_factory.mktemp("silence")
    return {"two": silent_scenario(folder / "two.kame", 2.0, runs=3),      # 4 tracks x 2 min = 44 MB decoded
            "one": silent_scenario(folder / "one.kame", 1.0, runs=1)}      # 2 tracks x 1 min = 11 MB


def test_the_booking_is_made_before_decoding_and_equals_what_is_held(silence):
    booked = []
    scenario = load_scenario(silence["two"], before_decode=booked.append)
    assert booked == [library.scenario_audio_bytes(scenario)] and booked[0] == 4 * 2 * 60 * 24_000 * 4

    def refuse(n_bytes: int) -> None:
        raise ScenarioError("two.kame", f"{n_bytes} bytes is too much")

    with pytest.raises(ScenarioError, match="too much"):
        load_scenario(silence["two"], before_decode=refuse)


def test_budget_limits_and_settings():
    budget = UploadBudget(max_bytes=100 * MB, per_upload_bytes=50 * MB)
    with pytest.raises(ScenarioError, match="one upload may take at most 50 MB"):
        budget.reserve(51 * MB)
    a, b = budget.reserve(40 * MB), budget.reserve(40 * MB)
    with pytest.raises(ScenarioError, match="80 of 100 MB in use \\(2 open\\)"):
        budget.reserve(30 * MB)
    a.release()
    a.release()  # twice is once
    assert (budget.held_bytes, budget.uploads) == (40 * MB, 1)
    b.release()
    assert budget.held_bytes == 0
    env = UploadBudget.of(UploadLimits.from_env({"KAME_UPLOAD_BUDGET_MB": "512", "KAME_UPLOAD_MAX_MB": "64"}))
    assert (env.max_bytes, env.per_upload_bytes) == (512 * MB, 64 * MB)
    assert UploadBudget.of(UploadLimits.from_env({})).max_bytes == 2048 * MB
    for bad in ("lots", "0", "nan", "-5"):
        with pytest.raises(ValueError, match="KAME_UPLOAD_BUDGET_MB"):
            UploadLimits.from_env({"KAME_UPLOAD_BUDGET_MB": bad})


def test_sessions_share_the_budget_and_a_refusal_keeps_the_session_as_it_was(silence):
    budget = UploadBudget(max_bytes=60 * MB, per_upload_bytes=50 * MB)
    opened = views.open_upload(str(silence["two"]), None, budget)
    first, status = opened.session, opened.status
    assert first.loaded is not None and "silence" in first.loaded.title, status
    assert budget.held_bytes == library.scenario_audio_bytes(first.loaded.scenario) and budget.uploads == 1

    second = views.open_upload(str(silence["one"]), None, budget).session  # 44 + 11 MB: fits
    kept = second.loaded
    refused = views.open_upload(str(silence["two"]), second, budget)  # 55 + 44 MB: refused
    second, status = refused.session, refused.status
    assert "in use" in status and "try again when other sessions have closed" in status, status
    assert second.loaded is kept and budget.uploads == 2  # the refused booking was given back at once

    views.discard_session(first)  # the first user left: its memory is free again
    assert budget.uploads == 1
    opened = views.open_upload(str(silence["two"]), second, budget)
    second, status = opened.session, opened.status
    assert second.loaded is not kept, status
    assert budget.uploads == 1 and budget.held_bytes == library.scenario_audio_bytes(second.loaded.scenario)

    too_big = UploadBudget(max_bytes=60 * MB, per_upload_bytes=20 * MB)
    refused = views.open_upload(str(silence["two"]), None, too_big)
    third, status = refused.session, refused.status
    assert third.loaded is None and "one upload may take at most 20 MB" in status and too_big.uploads == 0


def test_opening_something_else_gives_the_booking_back(silence):
    budget = UploadBudget(max_bytes=60 * MB, per_upload_bytes=50 * MB)
    session = views.open_upload(str(silence["one"]), None, budget).session
    assert budget.uploads == 1
    names = library.bundled_names()
    if names:
        session = views.open_bundled(names[0], session).session
    else:  # no scenarios folder: another upload replaces the first booking
        session = views.open_upload(str(silence["two"]), session, budget).session
    assert budget.uploads == (0 if names else 1)
    views.discard_session(session)
    assert budget.uploads == 0 and budget.held_bytes == 0
