"""Nothing lost in a crash: a live session is journaled as it runs; what a crash leaves becomes an ordinary saved
session marked incomplete, loadable everywhere. In process (a session whose end never came) and against a real
server killed with SIGKILL and started again."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario
from kame_core.session import SessionStore
from kame_core.session.journal import INCOMPLETE_NOTE, SessionJournal
from kame_core.session.store import claim_digest
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at
from kame_core.testing.servers import free_port, listens, wait_for_process
from tests.shared_data import REPO


def _stack() -> Stack:
    return Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.3)]),
                 make_front_end=EchoFrontEnd, llm=ScriptedLLM(lambda _: "the capital of france is paris"),
                 tts=ToneTTS())


CLAIM = "0123456789abcdef" * 4  # a page's claim (128 bits, hex)


def test_a_session_whose_end_never_came_is_recovered_incomplete(tmp_path):
    store = SessionStore(tmp_path)
    runner = _stack().runner("kame")
    journal = SessionJournal(store.journal("talk-20260101-000000-abcdef01"), session_id="talk-20260101-000000-abcdef01",
                             title="Talk session (live protocol)", components="doubles",
                             trace_of=lambda: runner.session.trace if runner.session else None, flush_every_s=0.0,
                             claim_digest=claim_digest(CLAIM))
    trace = runner.run_sync(np.zeros(4 * SAMPLE_RATE, np.float32), journal)  # never closed, never discarded
    assert store.recover() == []  # its session is live (it holds the journal's mark): left alone
    journal._mark.drop()  # the process died: the kernel dropped its locks
    with open(store.journal("talk-20260101-000000-abcdef01") / "frames.jsonl", "a") as half:
        half.write('{"text_piece": "cut in the mid')  # the line being written when the process died
    (saved,) = store.recover()
    assert not store.journal_root.exists() or not any(store.journal_root.iterdir())
    got = load_scenario(saved).runs["kame"]
    assert got.n_frames == trace.n_frames and got.config["incomplete"] == INCOMPLETE_NOTE
    assert INCOMPLETE_NOTE in load_scenario(saved).title
    assert got.spoken_text() == trace.spoken_text()
    # every event that went out with a frame (the end adds onsets and may close requests after the last frame)
    live = [(e.kind, round(e.t, 3)) for e in sorted(trace.events, key=lambda e: e.t)
            if e.kind is not EventKind.RESPONSE_ONSET]
    assert [(e.kind, round(e.t, 3)) for e in got.events] == live[:len(got.events)]
    assert len(got.events) >= len(live) - 2
    np.testing.assert_allclose(got.output_audio, trace.output_audio, atol=1e-4)  # saved as 16-bit FLAC
    assert store.recover() == []  # recovered once
    # the page that made it still owns it (the claim travelled with the journal), and no other claim does
    assert store.owns("talk-20260101-000000-abcdef01", CLAIM)
    assert not store.owns("talk-20260101-000000-abcdef01", "f" * 32)
    assert CLAIM not in (store.journal_root.parent / "talk-20260101-000000-abcdef01.claim").read_text()


def test_a_recovered_session_opens_for_its_owner_only(tmp_path):
    """The app's Talk open on a session recovered from a journal: the claim of the page that made it opens it."""
    from demo.open.views import open_talk_session

    sid = "talk-20260101-000000-" + "ab" * 12
    store = SessionStore(tmp_path)
    runner = _stack().runner("kame")
    journal = SessionJournal(store.journal(sid), session_id=sid, title="Talk session (live protocol)",
                             components="doubles", trace_of=lambda: runner.session.trace if runner.session else None,
                             flush_every_s=0.0, claim_digest=claim_digest(CLAIM))
    runner.run_sync(np.zeros(2 * SAMPLE_RATE, np.float32), journal)
    journal._mark.drop()  # the process died
    (saved,) = store.recover()
    stranger = open_talk_session(f"{sid} {'e' * 32}", None, sessions_dir=tmp_path)
    assert stranger.file is None and "Cannot open" in stranger.status
    owner = open_talk_session(f"{sid} {CLAIM}", None, sessions_dir=tmp_path)
    assert owner.file is not None and owner.session.loaded is not None, owner.status
    assert INCOMPLETE_NOTE in owner.session.loaded.title


def test_an_unreadable_journal_is_kept_and_does_not_stop_recovery(tmp_path):
    store = SessionStore(tmp_path)
    bad = store.journal("talk-20260101-000000-00000000")
    bad.mkdir(parents=True)
    (bad / "head.json").write_text("{not json")
    assert store.recover() == [] and bad.is_dir()


def _start(port: int, sessions, log) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "kame_core.serve", "--port", str(port), "--sessions-dir",
                             str(sessions), "--no-small-model"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"))
    wait_for_process(proc, lambda: listens(port), timeout_s=240, what="the server")
    return proc


@pytest.mark.slow
def test_kill_9_mid_conversation_loses_at_most_the_last_second(tmp_path):
    from kame_core.serve.client import talk
    from kame_core.tts import make_tts

    sessions, port = tmp_path / "sessions", free_port()
    question = make_tts("piper").synthesize("What is the capital of France?").audio
    with open(tmp_path / "server.log", "wb") as log:
        proc = _start(port, sessions, log)
        try:
            async def killed_mid_answer() -> float:
                client = asyncio.ensure_future(talk(f"ws://127.0.0.1:{port}/api/chat?claim={CLAIM}", question,
                                                    tail_s=20.0))
                await asyncio.sleep(len(question) / SAMPLE_RATE + 3.0)
                streamed = time.monotonic()
                os.kill(proc.pid, signal.SIGKILL)
                try:
                    await asyncio.wait_for(client, 30)
                except Exception:  # noqa: BLE001 - the connection drops with the server
                    pass
                return streamed

            asyncio.run(killed_mid_answer())
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert list(sessions.glob("*.kame")) == []  # nothing was saved by the dead server
        proc = _start(port, sessions, log)  # recovery runs before it listens
        proc.terminate()
        proc.wait(30)
    (saved,) = sessions.glob("*.kame")
    scenario = load_scenario(saved)
    trace = scenario.runs["kame"]
    assert INCOMPLETE_NOTE in scenario.title and trace.config["incomplete"] == INCOMPLETE_NOTE
    expected_s = len(question) / SAMPLE_RATE + 3.0
    assert trace.n_frames * FRAME_SECONDS >= expected_s - 1.5, (trace.n_frames, expected_s)  # ≤ ~1 s lost
    assert float(np.abs(trace.user_audio).max()) > 0.05  # the question is in it
    assert SessionStore(sessions).owns(saved.stem, CLAIM)  # the page that made it opens it after the crash


@pytest.mark.slow
def test_sigterm_mid_conversation_saves_tells_and_closes_1001(tmp_path):
    """A real ``python -m kame_core.serve`` told to stop (SIGTERM) mid-conversation: the client gets ``saved`` and
    then 1001 "server shutting down", the session is saved whole (not incomplete), no journal is left."""
    from kame_core.serve import protocol as P
    from kame_core.serve.client import talk

    sessions, port = tmp_path / "sessions", free_port()
    tone = (0.2 * np.sin(2 * np.pi * 220 * np.arange(3 * SAMPLE_RATE) / SAMPLE_RATE)).astype(np.float32)
    with open(tmp_path / "server.log", "wb") as log:
        proc = _start(port, sessions, log)
        try:
            async def stopped_mid_conversation():
                client = asyncio.ensure_future(talk(f"ws://127.0.0.1:{port}/api/chat", tone, tail_s=20.0))
                await asyncio.sleep(4.0)
                proc.send_signal(signal.SIGTERM)
                return await asyncio.wait_for(client, 60)

            result = asyncio.run(stopped_mid_conversation())
            assert proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it stopped cleanly
        finally:
            if proc.poll() is None:
                proc.kill()
    assert result.close_code == P.CLOSE_GOING_AWAY and result.close_reason == "server shutting down"
    saved = result.saved()
    assert saved is not None and saved["error"] is None and saved["frames"] >= 30
    scenario = load_scenario(sessions / saved["file"])
    assert "incomplete" not in scenario.runs["kame"].config
    assert scenario.runs["kame"].n_frames == saved["frames"]
    assert not any(SessionStore(sessions).journal_root.iterdir())
