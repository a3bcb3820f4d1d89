"""The app module builds and its callbacks turn bad input into a message, never an exception."""
from __future__ import annotations

import app


def test_app_builds():
    assert app.build_app() is not None


def test_bad_upload_is_a_clear_message(tmp_path):
    bad = tmp_path / "bad.kame"
    bad.write_text("not a zip")
    fig, rows, status, audio = app.open_upload(str(bad))
    assert fig is None and rows == [] and "Invalid scenario file" in status and "bad.kame" in status


def test_escaping_name_is_refused():
    fig, rows, status, audio = app.open_bundled("../../etc/passwd")
    assert fig is None and "Cannot open scenario" in status


def test_summary_names_what_produced_each_run():
    from demo.inspector import run_summary_rows
    from kame_core.runner import SessionConfig, TandemRunner
    from kame_core.scenario import Scenario

    from .doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

    seg = [words_at("hello there", 0.3)]
    trace = TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(lambda u: "hi"), SessionConfig()).run_sync(
        speech_like([(0.3, seg[0][-1].end)], 2.0))
    cascade = TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(lambda u: "hi"), SessionConfig()).run_sync(
        speech_like([(0.3, seg[0][-1].end)], 2.0))
    cascade.mode = "cascade"
    del cascade.provenance["front_end"]
    rows = run_summary_rows(Scenario(name="s", runs={"kame": trace, "cascade": cascade}))
    assert rows[0][2] == "test double (tests only)"
    assert rows[1][2].startswith("cascade (STT → LLM → TTS)") and "tests.doubles" in rows[1][2]
