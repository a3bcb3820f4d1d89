"""One live session, whatever the door (:class:`kame_core.session.LiveSession`): the jitter buffer, the runner
thread, the input limit, how it stops and finishes, and that its front-end (a pool slot) is always given back.
Scripted STT and LLM, a front-end double holding a pretend slot; the real-time clock (a few seconds)."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.protocols import PoolFull
from kame_core.session import LiveSession, SessionStore, new_session_id
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at


class SlotDouble(EchoFrontEnd):
    """A front-end that holds a pretend slot and counts how often it is given back."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def made() -> list[SlotDouble]:
    return []


@pytest.fixture
def stack(made) -> Stack:
    def front_end() -> SlotDouble:
        made.append(SlotDouble())
        return made[-1]

    return Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.2)]),
                 make_front_end=front_end, llm=ScriptedLLM(lambda _: "paris is the capital"), tts=ToneTTS())


def _kame(stack: Stack):
    return lambda clock: stack.runner("kame", clock=clock)


@pytest.mark.slow  # over 5 s (docs/testing.md): seconds of a session on the real-time clock
def test_the_driver_waits_for_the_head_start_then_answers_and_gives_the_slot_back(stack, made):
    ended = []
    live = LiveSession(_kame(stack), head_start_s=0.3, on_end=lambda: ended.append(True))
    live.push(np.zeros(int(0.2 * SAMPLE_RATE), np.float32))
    assert not live.started
    live.push(np.zeros(int(1.8 * SAMPLE_RATE), np.float32))
    assert live.started
    trace = live.finish(timeout_s=30)
    assert trace is not None and trace.n_frames >= 25 and trace.config["clock"] == "real-time"
    assert "paris" in trace.spoken_text().lower()
    assert made[0].closed == 1 and ended == [True] and live.ended and not live.error


def test_input_past_the_limit_is_dropped(stack, made):
    live = LiveSession(_kame(stack), head_start_s=10.0, max_input_s=0.5)
    live.push(np.zeros(SAMPLE_RATE, np.float32))
    assert live.received_s == pytest.approx(0.5) and live.input_full
    live.push(np.zeros(SAMPLE_RATE, np.float32))
    assert live.received_s == pytest.approx(0.5) and not live.started
    live.stop()
    assert live.wait() is None and made[0].closed >= 1


def test_stopping_before_the_driver_started_gives_the_slot_back(stack, made):
    live = LiveSession(_kame(stack))
    live.stop()
    assert made[0].closed == 1 and live.wait() is None
    live.push(np.ones(SAMPLE_RATE, np.float32))  # a stopped session takes no more input
    assert live.received_s == 0 and not live.started


def test_a_full_pool_refuses_the_session_and_nothing_is_held(stack):
    def full(clock):
        raise PoolFull("all 2 session slots of this model are in use")

    with pytest.raises(PoolFull):
        LiveSession(full)


def test_stop_ends_a_running_session_now(stack, made):
    live = LiveSession(_kame(stack), head_start_s=0.1)
    live.push(np.zeros(int(0.5 * SAMPLE_RATE), np.float32))
    live.stop()
    trace = live.wait(timeout_s=30)
    assert trace is not None and trace.n_frames < 40 and made[0].closed == 1


def test_the_store_names_and_saves_sessions(tmp_path, stack):
    store = SessionStore(tmp_path)
    sid = new_session_id("talk")
    assert sid.startswith("talk-") and store.path(sid) == tmp_path / f"{sid}.kame"
    with pytest.raises(ValueError, match="not a session id"):
        store.path("../x")
    with pytest.raises(ValueError, match="not a session kind"):
        new_session_id("../x")
    with stack.session("moshi") as runner:
        trace = runner.run_sync(np.zeros(SAMPLE_RATE, np.float32))
    saved = store.save(sid, {"moshi": trace}, title="t", components="doubles", tags=("live",))
    assert saved.path.is_file() and saved.scenario.runs["moshi"].n_frames == trace.n_frames
    assert "Components: doubles" in saved.scenario.description
