"""Replaying a recorded run's back-ends reproduces it, and a forced delay changes only the front-end's part."""
from __future__ import annotations

import pytest

from demo.figures.badge import provenance_badge
from kame_core.analysis.metrics import session_metrics
from kame_core.clock import VirtualClock
from kame_core.pipelines.replay import ReplayLLM, ReplaySTT, ReplayUnavailable, recorded_input, rerun_front_end
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import EventKind
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

QUESTION = "what is the tallest mountain in europe and how high is it"


def answer(transcript: str) -> str:
    words = transcript.split()
    if len(words) < 6:
        return "let me think about that for a moment please"
    return "mount elbrus in russia at five thousand six hundred and forty two metres"


@pytest.fixture(scope="module")
def recorded():
    seg = words_at(QUESTION, 0.5, per_word=0.35)
    audio = speech_like([(seg[0].start, seg[-1].end)], seg[-1].end + 0.6)
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT([seg]), ScriptedLLM(answer), SessionConfig(), VirtualClock())
    return runner.run_sync(audio)


def _kinds(trace, *kinds):
    return [(round(e.t, 6), e.kind, {k: v for k, v in e.data.items() if k != "messages"})
            for e in trace.events_of(*kinds)]


def test_trace_records_what_a_replay_needs(recorded):
    assert recorded.config["stt_virtual_latency_s"] == pytest.approx(0.1)
    assert recorded.config["input_end_s"] < recorded.duration
    assert len(recorded_input(recorded)) < len(recorded.user_audio)
    assert recorded.events_of(EventKind.ORACLE_APPEND)[0].data["text"].strip()


def test_replay_at_the_recorded_delay_reproduces_the_run_exactly(recorded):
    again = rerun_front_end(recorded, EchoFrontEnd)
    assert [f.text_piece for f in again.frames] == [f.text_piece for f in recorded.frames]
    assert [(f.oracle.token, f.oracle.revision) for f in again.frames] == \
        [(f.oracle.token, f.oracle.revision) for f in recorded.frames]
    kinds = (EventKind.STT_PARTIAL, EventKind.STT_FINAL, EventKind.LLM_REQUEST_START, EventKind.ORACLE_RESET,
             EventKind.LLM_REQUEST_CANCEL, EventKind.LLM_REQUEST_FINISH, EventKind.SELF_CORRECTION)
    assert _kinds(again, *kinds) == _kinds(recorded, *kinds)
    assert session_metrics(again).onset_latency_s == session_metrics(recorded).onset_latency_s


def test_forced_delay_rerun_holds_the_front_end_and_keeps_the_back_ends(recorded):
    delayed = rerun_front_end(recorded, EchoFrontEnd, forced_delay_ms=1500)
    assert delayed.config["forced_delay_ms"] == 1500
    base, late = session_metrics(recorded).onset_latency_s, session_metrics(delayed).onset_latency_s
    assert late is not None and base is not None and late >= 1.5 and late > base
    assert any(f.held for f in delayed.frames)
    back = (EventKind.STT_FINAL, EventKind.LLM_REQUEST_START, EventKind.ORACLE_RESET)
    assert _kinds(delayed, *back) == _kinds(recorded, *back)
    # the held front-end starts on the final oracle: no self-correction is left to make
    assert delayed.spoken_text().startswith("mount elbrus")


def test_rerun_provenance_says_what_was_replayed(recorded):
    rerun = rerun_front_end(recorded, EchoFrontEnd, forced_delay_ms=500)
    assert rerun.provenance["replay"].kind == "replay"
    assert rerun.provenance["stt"].label == "replayed from the recording"
    assert rerun.provenance["llm"].label == "replayed from the recording"
    badge = provenance_badge(rerun, recorded=True)
    assert "replayed" in badge.origin and "test double" in badge.headline


def test_replay_stt_and_llm_are_protocol_implementations(recorded):
    from kame_core.protocols import StreamingLLM, StreamingSTT

    assert isinstance(ReplaySTT(recorded), StreamingSTT) and isinstance(ReplayLLM(recorded), StreamingLLM)
    assert ReplayLLM(recorded).match(12345.0) is None


def test_runs_without_back_end_events_cannot_be_replayed(recorded):
    moshi = TandemRunner(EchoFrontEnd(), None, None, SessionConfig(mode="moshi")).run_sync(recorded.user_audio)
    with pytest.raises(ReplayUnavailable, match="mode"):
        rerun_front_end(moshi, EchoFrontEnd)
    bare = rerun_front_end(recorded, EchoFrontEnd)
    bare.events = [e for e in bare.events if e.kind is not EventKind.LLM_REQUEST_START]
    with pytest.raises(ReplayUnavailable, match="LLM"):
        rerun_front_end(bare, EchoFrontEnd)
