"""The app builds, and its callbacks turn bad input into a message, never an exception."""
from __future__ import annotations

import json
import zipfile

import app
from demo.open import views
from demo.tabs.compare import compare
from demo.tabs.delay import forced_delay
from demo.tabs.timeline import seek
from kame_core.settings import Settings


def test_app_builds_with_analytics_off():
    import os

    blocks = app.build_app()
    assert blocks is not None and os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert blocks.analytics_enabled is False
    names = {d.api_name for d in blocks.fns.values() if d.api_name}
    assert {"open_scenario", "upload_scenario", "open_training", "seek", "show_run", "compare", "forced_delay",
            "delay_curve", "live_upload", "download_scenario"} <= names


def test_bad_upload_is_a_clear_message(tmp_path):
    bad = tmp_path / "bad.kame"
    bad.write_text("not a zip")
    opened = views.open_upload(str(bad))
    status = opened.status
    assert opened.figure is None and opened.rows == [] and "Invalid scenario file" in status and "bad.kame" in status


def test_invalid_scenario_names_the_field(tmp_path):
    path = tmp_path / "x.kame"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("scenario.json", json.dumps({"schema_version": 1, "name": "x", "runs": "nope"}))
    status = views.open_upload(str(path)).status
    assert "scenario.json.runs" in status and "expected a list" in status


def test_escaping_name_is_refused():
    opened = views.open_bundled("../../etc/passwd")
    assert opened.figure is None and "Cannot open scenario" in opened.status


def test_empty_scenarios_folder_says_so(tmp_path):
    settings = Settings.from_env({"KAME_SCENARIOS_DIR": str(tmp_path)})
    status = views.open_bundled(None, settings=settings).status
    assert "No scenario files in" in status and str(tmp_path) in status


def test_callbacks_without_a_scenario_say_what_to_do():
    assert "Open a scenario first" in seek(1.0).details
    assert "Open a scenario first" in compare().names
    assert "Cannot re-run" in forced_delay(1.0).text


def test_summary_names_what_produced_each_run():
    from demo.open.inspector import run_summary_rows
    from kame_core.pipelines.tandem import TandemRunner
    from kame_core.scenario import Scenario
    from kame_core.session.config import SessionConfig
    from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

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


def test_a_finished_session_takes_its_private_files_with_it():
    session = views.AppSession()
    folder = session.files()
    (folder / "x.wav").write_bytes(b"1")
    views.discard_session(session)
    assert not folder.exists()


def test_the_header_says_at_each_page_load_when_talk_sessions_cannot_be_recorded(tmp_path):
    """The app's chat server probes its sessions folder; the header line reads it at every page load."""
    from demo.app.server import chat_server
    from kame_core.session.disk import probe_writable

    folder = tmp_path / "sessions"
    chat = chat_server(Settings.from_env({"KAME_SESSIONS_DIR": str(folder)}))
    blocks = app.build_app(tickets=chat.tickets, recording=chat.recording_problem)
    (line,) = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "kame-recording"]
    load = line.load_event_to_attach[0]
    assert load() == ""  # writable: nothing to say
    broken = folder.parent / "not-a-folder"
    broken.write_text("a file where the folder should be")
    assert probe_writable(broken) is not None
    chat_on_file = chat_server(Settings.from_env({"KAME_SESSIONS_DIR": str(broken)}))
    said = app.build_app(recording=chat_on_file.recording_problem)
    (line,) = [b for b in said.blocks.values() if getattr(b, "elem_id", None) == "kame-recording"]
    text = line.load_event_to_attach[0]()
    assert text.startswith("⚠ **Live sessions are refused: the sessions folder cannot be written")
    assert str(broken) not in text
