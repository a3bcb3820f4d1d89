"""Tandem runner: forced delay, onset latency sign, Moshi mode, clocks, concurrent sessions."""
from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from kame_core.analysis.metrics import median_onset_latency, session_metrics, speech_segments
from kame_core.clock import FRAME_SECONDS, SAMPLES_PER_FRAME, RealTimeClock, VirtualClock, frame_of
from kame_core.pipelines.tandem import TandemRunner
from kame_core.protocols import STTEvent
from kame_core.record.trace import EventKind
from kame_core.session import LiveSource, UserTurnTracker
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

QUESTION = "what is the capital city of france"


def run(delay_ms=0, segments=None, mode="kame", clock=None, answer="the capital of france is paris", **llm):
    segments = segments or [words_at(QUESTION, 0.5)]
    total = segments[-1][-1].end + 1.0
    audio = speech_like([(s[0].start, s[-1].end) for s in segments], total)
    fe = EchoFrontEnd()
    runner = TandemRunner(fe, ScriptedSTT(segments), ScriptedLLM(lambda u: answer, **llm),
                          SessionConfig(mode=mode, forced_delay_ms=delay_ms), clock or VirtualClock())
    return runner.run_sync(audio), fe


def test_every_frame_has_all_four_streams():
    trace, _ = run()
    n = trace.n_frames
    assert n > 0 and len(trace.user_audio) == len(trace.output_audio) == n * SAMPLES_PER_FRAME
    assert any(f.oracle.token is not None for f in trace.frames)
    assert any(not f.text_is_padding for f in trace.frames)
    assert np.abs(trace.output_audio).max() > 0 and np.abs(trace.user_audio).max() > 0


def test_zero_delay_starts_before_the_user_finishes():
    trace, _ = run(delay_ms=0)
    m = session_metrics(trace)
    assert m.onset_latency_s is not None and m.onset_latency_s < 0
    assert not trace.events_of(EventKind.HOLD_START)
    assert all(not f.held for f in trace.frames)


@pytest.mark.parametrize("delay_ms", [500, 1500, 3000])
def test_forced_delay_holds_until_delay_after_speech_end(delay_ms):
    """Frame i is the audio of [i, i+1) x 80 ms: it is held while it starts before the end of speech + D, so the
    onset (measured at the frame's start, as the metrics do) is never below D (it was 80 ms below: 1.42 s at
    1.5 s)."""
    trace, fe = run(delay_ms=delay_ms)
    (start, end), = speech_segments(trace)
    release = end + delay_ms / 1000
    for i, f in enumerate(trace.frames):
        if i * FRAME_SECONDS < release - 1e-9:
            assert f.held and f.text_is_padding and not trace.output_frame(i).any(), i
    m = session_metrics(trace)
    assert m.onset_latency_s is not None
    assert delay_ms / 1000 <= m.onset_latency_s < delay_ms / 1000 + 2 * FRAME_SECONDS
    assert trace.events_of(EventKind.HOLD_START) and trace.events_of(EventKind.HOLD_END)
    assert any(hold for _, hold in fe.steps), "the front-end is told it is held"


def test_forced_delay_hold_continues_when_user_resumes():
    first = words_at("so I was wondering", 0.5)
    second = words_at("what the capital of france is", first[-1].end + 0.9)  # resumes within the delay
    trace, _ = run(delay_ms=1500, segments=[first, second])
    resume_frame = frame_of(second[0].start)
    assert all(f.held for f in trace.frames[: resume_frame + 1])
    onset = session_metrics(trace, turn_gap_s=1.0).onsets
    assert onset[0].text_onset >= second[-1].end + 1.5 - FRAME_SECONDS


def test_forced_delay_rule_of_the_user_turn_tracker():
    user = UserTurnTracker()
    assert user.holding(0.0, 1.0)  # before the user spoke
    user.on_event(STTEvent("speech_start", start=1.0))
    assert user.holding(5.0, 1.0)
    user.on_event(STTEvent("speech_end", end=5.0))
    assert user.holding(5.5, 1.0) and not user.holding(6.0, 1.0)
    assert not user.holding(0.0, 0.0)


def test_moshi_mode_has_no_oracle_and_no_llm():
    trace, fe = run(mode="moshi")
    assert all(f.oracle.is_padding for f in trace.frames)
    assert not trace.events_of(EventKind.LLM_REQUEST_START)
    assert "llm" not in trace.provenance and trace.provenance["stt"].kind == "test-double"
    assert all(tok is None for tok, _ in fe.steps)


def test_kame_mode_requires_stt_and_llm():
    with pytest.raises(ValueError, match="KAME mode needs"):
        TandemRunner(EchoFrontEnd(), None, None, SessionConfig(mode="kame"))


def test_trace_records_configuration_and_provenance_without_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "test-secret-value-1234567890")  # fake key
    trace, _ = run()
    assert trace.config["forced_delay_ms"] == 0 and trace.config["oracle"]["interval_s"] == 0.5
    assert trace.config["clock"] == "virtual"
    assert set(trace.provenance) == {"front_end", "stt", "llm"}
    assert "sk-test-secret" not in repr(trace.to_json())


def test_virtual_clock_is_deterministic():
    a, _ = run()
    b, _ = run()
    assert a.to_json() == b.to_json()


@pytest.mark.slow  # runs on the real-time clock
def test_same_runner_code_on_the_real_time_clock():
    segments = [words_at("hi there", 0.1, per_word=0.2)]
    trace, _ = run(segments=segments, clock=RealTimeClock(), first_chunk_s=0.05)
    assert trace.config["clock"] == "real-time"
    assert trace.events_of(EventKind.ORACLE_RESET)
    assert session_metrics(trace).onset_latency_s is not None


def test_turns_and_onsets_for_two_turns():
    turn1 = words_at("what is two plus two", 0.5)
    turn2 = words_at("and times three", turn1[-1].end + 4.0)
    trace, _ = run(segments=[turn1, turn2], answer="four")
    m = session_metrics(trace)
    assert len(m.onsets) == 2 and all(o.text_onset is not None for o in m.onsets)
    boundaries = trace.events_of(EventKind.TURN_BOUNDARY)
    assert boundaries and "four" in boundaries[0].data["assistant_said"]
    assert len(trace.events_of(EventKind.RESPONSE_ONSET)) == 2


def test_concurrent_sessions_are_isolated() -> None:
    """Two sessions on one event loop and two more in threads produce the same traces as alone."""
    def build(question, answer):
        seg = [words_at(question, 0.4)]
        audio = speech_like([(seg[0][0].start, seg[0][-1].end)], seg[0][-1].end + 1)
        return TandemRunner(EchoFrontEnd(), ScriptedSTT(seg), ScriptedLLM(lambda u: answer),
                            SessionConfig(), VirtualClock()), audio

    alone = [build("what is the capital of japan", "tokyo"),
             build("how many legs does a spider have", "eight")]
    solo = [r.run_sync(a).to_json() for r, a in alone]

    pairs = [build("what is the capital of japan", "tokyo"), build("how many legs does a spider have", "eight")]

    async def both():
        return await asyncio.gather(*(r.run(a) for r, a in pairs))
    together = VirtualClock().run(both)
    # one shared loop: traces differ only in clock bookkeeping, not content
    for solo_json, tr in zip(solo, together):
        assert [f for f in tr.to_json()["frames"]["text_piece"]] == solo_json["frames"]["text_piece"]

    results: dict[int, dict] = {}

    def session_in_thread(k: int, question: str, answer: str) -> None:
        runner, audio = build(question, answer)
        results[k] = runner.run_sync(audio).to_json()

    threads = [threading.Thread(target=session_in_thread, args=(k, *q))
               for k, q in enumerate([("what is the capital of japan", "tokyo"),
                                      ("how many legs does a spider have", "eight")])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == solo[0] and results[1] == solo[1]
    said = " ".join(solo[0]["frames"]["text_piece"])
    assert "tokyo" in said and "eight" not in said


def test_median_onset_over_sessions():
    traces = [run(delay_ms=d)[0] for d in (0, 500, 1500)]
    assert median_onset_latency(traces) == pytest.approx(session_metrics(traces[1]).onset_latency_s)


def test_live_source_reads_silence_on_underrun_and_ends_when_closed():
    src = LiveSource()
    src.push(np.ones(SAMPLES_PER_FRAME + 100, np.float32))
    assert src.read_frame(0).all() and not src.read_frame(1).any()  # an under-run is silence, for good
    assert src.underruns == 1
    src.close()
    last = src.read_frame(2)  # the partial frame pushed before closing, zero-padded
    assert last[:100].all() and not last[100:].any()
    assert src.read_frame(3) is None and src.read_frame(4) is None  # ended, for every later frame
    again = LiveSource()
    again.push(np.ones(2 * SAMPLES_PER_FRAME, np.float32))
    again.read_frame(0)
    with pytest.raises(ValueError, match="in order"):
        again.read_frame(0)


def test_latency_breakdown_follows_the_answer_from_the_end_of_speech():
    from demo.open.inspector import latency_markdown
    from kame_core.analysis.metrics import latency_breakdown

    trace, _ = run(delay_ms=1500)
    (turn,) = latency_breakdown(trace)
    names = [s.name for s in turn.steps]
    assert names == ["end of user speech", "STT final", "LLM request", "first chunk", "oracle reset",
                     "first audible output"]
    times = [s.t for s in turn.steps]
    assert None not in times and times == sorted(times), times  # each anchor after the one before
    (start, end), = speech_segments(trace)
    assert turn.user_end == end and turn.since_end(turn.steps[-1]) >= 1.5  # the forced delay held it
    assert turn.requests and all(r.reason for r in turn.requests)
    table = latency_markdown(trace)
    assert "| end of user speech | STT final |" in table and "LLM requests: #" in table and "⚠" not in table


def test_latency_breakdown_of_the_cascade():
    from kame_core.analysis.metrics import latency_breakdown
    from kame_core.pipelines import make_runner
    from kame_core.testing.doubles import ToneTTS

    words = words_at(QUESTION, 0.5)
    audio = speech_like([(words[0].start, words[-1].end)], words[-1].end + 1.0)
    trace = make_runner("cascade", stt=ScriptedSTT([words]), llm=ScriptedLLM(lambda u: "paris it is"),
                        tts=ToneTTS(), clock=VirtualClock()).run_sync(audio)
    (turn,) = latency_breakdown(trace)
    assert [s.name for s in turn.steps] == ["end of user speech", "STT final", "LLM request", "LLM first token",
                                            "TTS first audio"]
    times = [s.t for s in turn.steps]
    assert None not in times and times == sorted(times), times
    assert [r.reason for r in turn.requests] == ["end of user turn"]
