"""The list of sessions made in this browser session: what a user made (Live, microphone, Talk) is listed in
their own session state, reopens from there, and nothing else can be opened through it."""
from __future__ import annotations

from demo.open import library, views
from kame_core.testing.sessions import silent_scenario


def _made(path, key: str) -> library.LoadedScenario:
    loaded = library.open_file(path, origin="live", key=key)
    loaded.recorded = False
    return loaded


def test_made_sessions_are_listed_reopened_and_private(tmp_path):
    first = silent_scenario(tmp_path / "a.kame", 0.2, runs=2)
    second = silent_scenario(tmp_path / "b.kame", 0.1, runs=1)
    session = views.AppSession()
    session.show(_made(first, "live:a"), "kame")
    session.show(_made(second, "live:b"), "kame")
    session.show(_made(second, "live:b"), "kame")  # shown again: listed once, label kept
    assert [m.key for m in session.made] == ["live:a", "live:b"]
    assert "kame, moshi" in session.made[0].label
    names = library.bundled_names()
    if names:  # opening a bundled scenario keeps the list
        session = views.open_bundled(names[0], session).session
        assert [m.key for m in session.made] == ["live:a", "live:b"]
    opened = views.open_made(session.made[0].label, session)
    session, status = opened.session, opened.status
    assert session.loaded.key == "live:a" and session.loaded.recorded is False, status
    assert len(session.made) == 2
    # an unknown label (another user's, a forged one) is refused; the session keeps what it had open
    other = views.AppSession()
    refused = views.open_made(session.made[0].label, other)
    other, status = refused.session, refused.status
    assert other.loaded is None and "Pick a session made in this browser session" in status
    refused = views.open_made("../../etc/passwd", session)
    session, status = refused.session, refused.status
    assert session.loaded.key == "live:a" and "Pick a session" in status
    # a made file deleted since: a clear refusal, nothing lost
    second.unlink()
    refused = views.open_made(session.made[1].label, session)
    session, status = refused.session, refused.status
    assert session.loaded.key == "live:a" and "Cannot reopen" in status


def test_the_list_keeps_the_newest(tmp_path):
    path = silent_scenario(tmp_path / "a.kame", 0.1, runs=1)
    session = views.AppSession()
    loaded = _made(path, "live:0")
    for i in range(views.MAX_MADE + 5):
        loaded.key = f"live:{i}"
        session.show(loaded, "kame")
    assert len(session.made) == views.MAX_MADE and session.made[-1].key == f"live:{views.MAX_MADE + 4}"
