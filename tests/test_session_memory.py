"""Ended sessions are freed by reference counting alone: no reference cycle runs through a finished live session
(its ChatSession, LiveSession, runner, trace, STT loop, front-end), so a server that runs for days does not keep
them until a full garbage collection that may never come. Automatic collection is off while these tests run and
nothing calls ``gc.collect()``: what is not freed by its reference count stays alive and is seen."""
from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kame_core.frontends import StandInFrontEnd
from kame_core.pipelines import make_runner
from kame_core.record.trace import SessionTrace
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import server as server_module
from kame_core.serve.client import talk
from kame_core.serve.session import ChatSession
from kame_core.session import LiveSession
from kame_core.stacks.served import served_stack
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import ScriptedLLM, ScriptedSTT, ToneTTS, tone, words_at
from kame_core.testing.servers import serving
from kame_core.testing.waiting import wait_until

pytest.importorskip("websockets")
pytest.importorskip("sphn")

QUESTION = "what is the capital of france"
TRACKED = (ChatSession, LiveSession, SessionTrace)


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    """Automatic garbage collection off for the test (never a ``gc.collect()``): only reference counting frees."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _stack() -> Stack:
    """Scripted STT and LLM, tone speech, and the CPU stand-in front-end with its background threads (as live)."""
    return Stack(make_stt=lambda: ScriptedSTT([words_at(QUESTION, 0.2)]),
                 make_front_end=lambda: StandInFrontEnd(ToneTTS(), answer_fn=lambda text: "Paris, I think."),
                 llm=ScriptedLLM(lambda _: "paris is the capital of france"), tts=ToneTTS())


def _counts() -> dict[str, int]:
    """Live (gc-tracked) instances of the session classes, by class name."""
    found = dict.fromkeys((t.__name__ for t in TRACKED), 0)
    for obj in gc.get_objects():
        if type(obj) in TRACKED:
            found[type(obj).__name__] += 1
    return found


def _tracking(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[Any]]:
    """Make the server build sessions that leave weak references to themselves and what they held once they end:
    the ChatSession, its LiveSession, runner and front-end, and the traces (being built, and finished)."""
    refs: list[weakref.ref[Any]] = []

    class Tracked(ChatSession):
        async def serve(self, conn: Any) -> Any:
            refs.append(weakref.ref(self))
            try:
                return await super().serve(conn)
            finally:
                live = self.live
                if live is not None:
                    held = (live, live.runner, live.front_end, live.trace, live.source.trace)
                    refs.extend(weakref.ref(obj) for obj in held if obj is not None)

    monkeypatch.setattr(server_module, "ChatSession", Tracked)
    return refs


@pytest.mark.slow  # near 5 s (docs/testing.md): four sessions of a live server on the wall clock
def test_finished_sessions_leave_nothing_alive_without_a_garbage_collection(tmp_path, monkeypatch,
                                                                            no_automatic_gc):
    refs = _tracking(monkeypatch)
    server = ChatServer(lambda: served_stack(_stack()), max_sessions=3, sessions_dir=tmp_path,
                        limits=Limits(first_audio_s=5.0, idle_s=5.0))
    with serving(standalone_app(server)) as port:
        url = f"ws://127.0.0.1:{port}/api/chat"
        asyncio.run(talk(url, tone(0.5), tail_s=0.3))  # the first session warms what is loaded once
        wait_until(lambda: len(server.results) == 1 and not server.active, 20, what="the warm-up session to end")
        before = _counts()
        del refs[:]

        async def three() -> list[Any]:  # at once: two end with {"type": "end"}, one just disconnects
            return await asyncio.gather(*(talk(url, tone(1.2), tail_s=1.0, end=k != 2, lead_s=0.2 * k)
                                          for k in range(3)))

        clients = asyncio.run(three())
        wait_until(lambda: len(server.results) == 4 and not server.active, 30, what="the three sessions to end")
        assert [c.saved() is not None for c in clients] == [True, True, False]  # the one that left is not told
        assert all(r.frames > 0 and r.path is not None for r in server.results[1:]), server.results
        kinds = {type(ref()).__name__ for ref in refs if ref() is not None}
        assert len(refs) >= 3 * 5, [type(r()).__name__ for r in refs]
        # the server's last steps after a close (logging, the result) run on its own thread: give them a moment
        wait_until(lambda: all(ref() is None for ref in refs), 10,
                   what=f"the ended sessions to be freed by reference counting (still alive: {sorted(kinds)})")
        after = _counts()
    assert all(after[name] <= before[name] for name in after), (before, after)


def test_a_runner_session_leaves_no_cycle(no_automatic_gc):
    """The driver, its STT loop and the stand-in front-end (its voice, its TTS thread) of a finished session."""
    front_end = StandInFrontEnd(ToneTTS(), answer_fn=lambda text: "Paris, I think.")
    runner = make_runner("kame", stt=ScriptedSTT([words_at(QUESTION, 0.2)]), front_end=front_end,
                         llm=ScriptedLLM(lambda _: "paris is the capital of france"), tts=ToneTTS())
    audio = np.zeros(24000 * 3, np.float32)
    audio[: len(tone(1.5))] = tone(1.5)
    trace = runner.run_sync(audio)
    assert trace.n_frames > 0 and any(not f.text_is_padding for f in trace.frames)  # it answered
    assert front_end._tts_pool is not None  # the voice used the front-end's TTS thread
    refs = [weakref.ref(obj) for obj in (runner, front_end, runner.session, trace)]
    del runner, front_end, trace
    alive = [type(ref()).__name__ for ref in refs if ref() is not None]
    assert alive == [], f"kept alive by a reference cycle: {alive}"


class _FailingSTT(ScriptedSTT):
    """Recognizes the question, then fails at the 15th frame (as a model that runs out of memory would)."""

    def accept(self, frame: np.ndarray) -> list[Any]:
        self.frames_seen = getattr(self, "frames_seen", 0) + 1
        if self.frames_seen == 15:
            raise OSError("the STT failed")
        return super().accept(frame)


class _FailingFrontEnd(StandInFrontEnd):
    """Speaks, then fails at its 15th step."""

    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> Any:
        self.steps_made = getattr(self, "steps_made", 0) + 1
        if self.steps_made == 15:
            raise OSError("the front-end failed")
        return super().step(user_frame, oracle_token, hold)


@pytest.mark.parametrize("failing", ["stt", "front-end"])
def test_a_failed_session_leaves_no_cycle(no_automatic_gc, failing, caplog):
    """The error's traceback holds the frames of the failed session, and the failed task holds the error: the
    runner clears them, so the session is freed with the error, and no task is left pending."""
    stt = (_FailingSTT if failing == "stt" else ScriptedSTT)([words_at(QUESTION, 0.2)])
    front_end = (_FailingFrontEnd if failing == "front-end" else StandInFrontEnd)(ToneTTS())
    runner = make_runner("kame", stt=stt, front_end=front_end, llm=ScriptedLLM(lambda _: "paris"), tts=ToneTTS())
    try:
        runner.run_sync(tone(2.0))
    except OSError as err:  # the error itself is dropped at the end of this block, as a server's log does
        assert f"the {failing} failed" in str(err).lower()
    else:
        pytest.fail("the session did not fail")
    session = runner.session
    assert session is not None
    refs = [weakref.ref(obj) for obj in (runner, front_end, stt, session, session.trace)]
    del runner, front_end, stt, session
    alive = [type(ref()).__name__ for ref in refs if ref() is not None]
    assert alive == [], f"kept alive by a reference cycle: {alive}"
    pending = [r.getMessage() for r in caplog.records if "pending" in r.getMessage()]
    assert pending == [], "every task of the session was awaited, even after one failed"
