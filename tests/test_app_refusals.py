"""Regression tests for inputs that once broke the app's views (issue 11, bugs 1-4 and 6): each refused input
gets a message naming the field, and the session keeps the scenario it had."""
from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from demo.open import library, views
from demo.tabs.compare import compare
from demo.tabs.delay import forced_delay
from kame_core.frontends import StandInFrontEnd
from kame_core.stacks.live import RerunFrontEnd

from .app_scenarios import piper, record_question

pytestmark = pytest.mark.slow  # scenarios are recorded with Piper


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sc")
    return {name: record_question(folder, name) for name in ("mountain", "bones")}


@pytest.fixture(scope="module")
def stand_in() -> RerunFrontEnd:
    tts = piper()
    return RerunFrontEnd(make=lambda: StandInFrontEnd(tts), description="CPU stand-in (Piper), test")


def _rewrite_trace(src: Path, dst: Path, edit) -> Path:
    """Copy ``src`` with the KAME run's trace.json passed through ``edit(dict)``."""
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    trace = json.loads(members["runs/kame/trace.json"])
    edit(trace)
    members["runs/kame/trace.json"] = json.dumps(trace, allow_nan=True).encode()
    with zipfile.ZipFile(dst, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return dst


def _first(trace: dict, kind: str) -> dict:
    return next(e for e in trace["events"] if e["kind"] == kind)


def _edit_append_without_request(t):
    del _first(t, "oracle_append")["data"]["request"]


def _edit_list_id(t):
    _first(t, "oracle_reset")["data"]["revision"] = [1, 2]


def _edit_words(t):
    _first(t, "stt_final")["data"]["words"] = 5


def _edit_huge_token(t):
    _first(t, "oracle_append")["data"]["tokens"] = [10 ** 400]


def _edit_audio_t(t):
    _first(t, "user_speech_start")["data"]["audio_t"] = "zero"


def _edit_nan_time(t):
    _first(t, "llm_request_start")["t"] = math.nan


@pytest.mark.parametrize("edit,field", [
    (_edit_append_without_request, "request"),
    (_edit_list_id, "revision"),
    (_edit_words, "words"),
    (_edit_huge_token, "tokens"),
    (_edit_audio_t, "audio_t"),
    (_edit_nan_time, ".t"),
])
def test_malformed_event_payloads_are_refused_naming_the_field_and_the_session_keeps_its_scenario(
        tmp_path, scenarios, edit, field):
    session = views.open_upload(str(scenarios["bones"])).session
    before = session.loaded
    bad = _rewrite_trace(scenarios["mountain"], tmp_path / "bad.kame", edit)
    refused = views.open_upload(str(bad), session)
    session, status = refused.session, refused.status
    assert status.startswith("**Invalid scenario file bad.kame**") and field in status, status
    assert "events[" in status                           # the event is located, not only the file named
    assert session.loaded is before and "bones" in status.lower() or session.loaded is before
    assert refused.figure is not None and refused.runs == list(before.scenario.runs)  # still shows what is open
    session, path = views.download_scenario(session)
    # download gives the kept scenario (a copy in the private folder), not the refused one
    assert Path(path).name == views.OFFERED + scenarios["bones"].name
    assert Path(path).read_bytes() == scenarios["bones"].read_bytes()


def test_a_refused_upload_leaves_compare_and_forced_delay_on_the_kept_scenario(tmp_path, scenarios, stand_in):
    session = views.open_upload(str(scenarios["bones"])).session
    bad = _rewrite_trace(scenarios["mountain"], tmp_path / "bad.kame", _edit_words)
    session = views.open_upload(str(bad), session).session
    compared = compare(session)
    session = compared.session
    assert "two hundred and six" in compared.rows[0][-1]
    text = forced_delay(1.0, session, front_end=stand_in).text
    assert "two hundred and six" in text or "bones" in text.lower()


def test_forced_delay_results_follow_the_opened_file_not_the_first_one(scenarios, stand_in):
    """Bug 1: every file-opened scenario once shared the cache key 'category'."""
    session = views.open_upload(str(scenarios["mountain"])).session
    key_a = session.loaded.key
    first = forced_delay(1.0, session, front_end=stand_in)
    session, text_a = first.session, first.text
    session = views.open_upload(str(scenarios["bones"]), session).session
    assert session.loaded.key != key_a and session.loaded.key != "category"
    second = forced_delay(1.0, session, front_end=stand_in)
    session, text_b = second.session, second.text
    assert "Elbrus" in text_a and "two hundred and six" in text_b and "Elbrus" not in text_b
    assert "bones" in second.figure.layout.title.text.lower()
    # the same file opened again shares its cached re-run
    again = library.open_file(scenarios["bones"])
    assert again.key == session.loaded.key


def test_a_zip_bomb_audio_member_is_refused_before_decoding(tmp_path, scenarios):
    """Bug 2: a small file whose WAV member inflates to 72 minutes is refused quickly, without decoding it."""
    import time

    import soundfile as sf

    from kame_core.clock import SAMPLE_RATE

    wav = tmp_path / "long.wav"
    sf.write(str(wav), np.zeros(72 * 60 * SAMPLE_RATE, dtype=np.int16), SAMPLE_RATE, subtype="PCM_16")
    with zipfile.ZipFile(scenarios["mountain"]) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    bomb = tmp_path / "bomb.kame"
    manifest = json.loads(members["scenario.json"])
    for run in manifest["runs"]:
        run["user_audio"] = "user.wav"           # every run uses the one inflating member
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in members.items():
            if name == "scenario.json":
                zf.writestr(name, json.dumps(manifest))
            elif name != "user.flac":
                zf.writestr(name, data)
        zf.write(wav, "user.wav")
    with zipfile.ZipFile(bomb) as zf:
        info = zf.getinfo("user.wav")
    assert info.compress_size < 300_000 and info.file_size > 190 * 2 ** 20   # ~200 KB stored, 200 MiB inflated
    session = views.open_upload(str(scenarios["bones"])).session
    started = time.perf_counter()
    refused = views.open_upload(str(bomb), session)
    session, status = refused.session, refused.status
    assert time.perf_counter() - started < 5.0
    assert "Invalid scenario file" in status and "min" in status, status
    assert "bones" in session.loaded.title.lower() or session.loaded.path == scenarios["bones"]
