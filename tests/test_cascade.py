"""The cascade baseline: waits for the end of the turn, speaks sentence by sentence, same lanes as KAME."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.analysis.metrics import session_metrics
from kame_core.clock import FRAME_SECONDS, RealTimeClock, VirtualClock
from kame_core.frontends import StandInFrontEnd
from kame_core.pipelines import CascadeConfig, CascadeRunner, make_runner
from kame_core.pipelines.cascade import split_sentences
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.trace import EventKind
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import (
    EchoFrontEnd,
    ScriptedLLM,
    ScriptedSTT,
    ToneTTS,
    dominant_pitch,
    loud,
    speech_like,
    words_at,
)

QUESTION = "what is the capital city of japan"
ANSWER = "The capital of Japan is Tokyo. It is also its largest city."


def user_input(*texts_and_starts):
    segments = [words_at(text, start) for text, start in texts_and_starts]
    audio = speech_like([(s[0].start, s[-1].end) for s in segments], segments[-1][-1].end + 1.0)
    return segments, audio


def run_cascade(segments=None, audio=None, answer=ANSWER, config=None, clock=None, tts=None, **llm):
    if segments is None:
        segments, audio = user_input((QUESTION, 0.5))
    runner = CascadeRunner(ScriptedSTT(segments), ScriptedLLM(lambda u: answer, **llm), tts or ToneTTS(),
                           clock or VirtualClock(), config)
    return runner.run_sync(audio)


def test_cascade_starts_later_than_tandem_on_the_same_input():
    segments, audio = user_input((QUESTION, 0.5))
    tandem = TandemRunner(StandInFrontEnd(ToneTTS(), background=False), ScriptedSTT(segments),
                          ScriptedLLM(lambda u: ANSWER), SessionConfig(), VirtualClock()).run_sync(audio)
    cascade = run_cascade(segments, audio)
    kame_onset = session_metrics(tandem).onset_latency_s
    cascade_onset = session_metrics(cascade).onset_latency_s
    assert kame_onset is not None and cascade_onset is not None
    assert cascade_onset > kame_onset
    # the cascade waited for the end of turn (silence + final), then the LLM's first chunk (0.3 s)
    assert cascade_onset >= CascadeConfig().turn_end_silence_s + 0.3 - FRAME_SECONDS


def test_cascade_trace_has_the_same_lanes_and_no_oracle():
    trace = run_cascade()
    assert trace.mode == "cascade" and trace.config["clock"] == "virtual"
    assert set(trace.provenance) == {"stt", "llm", "tts"}
    assert all(f.oracle.is_padding and f.oracle.revision is None and not f.held for f in trace.frames)
    assert not trace.events_of(EventKind.ORACLE_RESET, EventKind.ORACLE_APPEND, EventKind.SELF_CORRECTION)
    kinds = {e.kind for e in trace.events}
    assert {EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END, EventKind.STT_PARTIAL, EventKind.STT_FINAL,
            EventKind.LLM_REQUEST_START, EventKind.LLM_FIRST_CHUNK, EventKind.LLM_REQUEST_FINISH,
            EventKind.TURN_BOUNDARY, EventKind.RESPONSE_ONSET} <= kinds
    assert trace.spoken_text() == ANSWER
    m = session_metrics(trace)
    assert m.llm_requests == 1 and m.oracle_revisions == 0 and m.self_corrections == 0
    (onset,) = m.onsets
    assert onset.latency_s > 0 and onset.audio_latency_s == pytest.approx(onset.latency_s)
    request = trace.events_of(EventKind.LLM_REQUEST_START)[0]
    assert request.data["transcript"] == QUESTION, "the whole transcript goes to the LLM"
    assert request.t >= trace.events_of(EventKind.STT_FINAL)[0].t


def test_cascade_words_sit_where_their_audio_is():
    trace = run_cascade()
    text_frames = [i for i, f in enumerate(trace.frames) if f.text_piece]
    assert len(text_frames) == len(ANSWER.split())
    for i in text_frames:
        word = trace.frames[i].text_piece.strip()
        assert loud(trace.output_frame(i))
        assert dominant_pitch(trace.output_frame(i + 1)) == pytest.approx(ToneTTS.pitch(word), abs=15)
    first_loud = next(i for i in range(trace.n_frames) if loud(trace.output_frame(i)))
    assert first_loud == text_frames[0]


def test_cascade_streams_sentence_by_sentence():
    tts = ToneTTS()
    trace = run_cascade(tts=tts, per_chunk_s=0.4)  # a slow LLM: the first sentence is spoken before it ends
    assert tts.calls == ["The capital of Japan is Tokyo.", "It is also its largest city."]
    finish = trace.events_of(EventKind.LLM_REQUEST_FINISH)[0].frame
    first_word = next(i for i, f in enumerate(trace.frames) if f.text_piece)
    assert first_word < finish


def test_cascade_waits_for_the_end_of_the_turn():
    # a pause shorter than the end-of-turn silence: one reply, after the second part
    segments, audio = user_input(("so tell me", 0.5), (QUESTION, 1.8 + 0.3))
    trace = run_cascade(segments, audio, config=CascadeConfig(turn_end_silence_s=0.8))
    (request,) = trace.events_of(EventKind.LLM_REQUEST_START)
    assert request.data["transcript"] == "so tell me " + QUESTION
    assert request.t >= segments[-1][-1].end + 0.8
    # a longer pause than the silence: it answers the first part already
    segments, audio = user_input(("so tell me", 0.5), (QUESTION, 1.8 + 2.5))
    trace = run_cascade(segments, audio, config=CascadeConfig(turn_end_silence_s=0.8))
    assert trace.events_of(EventKind.LLM_REQUEST_START)[0].data["transcript"] == "so tell me"


def test_user_speaking_again_interrupts_the_answer():
    long_answer = " ".join(["word"] * 40) + "."
    segments, audio = user_input((QUESTION, 0.5), ("stop please", 6.0))
    trace = run_cascade(segments, audio, answer=long_answer)
    interrupted = [e for e in trace.events_of(EventKind.TURN_BOUNDARY) if e.data.get("interrupted")]
    assert interrupted and interrupted[0].data["to"] == "user"
    cut = interrupted[0].frame
    quiet = trace.frames[cut + 1: cut + 10]
    assert all(not f.text_piece for f in quiet)
    assert not np.any(np.concatenate([trace.output_frame(i) for i in range(cut + 1, cut + 10)]))
    assert len(trace.events_of(EventKind.LLM_REQUEST_START)) == 2, "and answers the new turn"


def test_llm_error_before_the_first_chunk_is_retried():
    trace = run_cascade(fail_after=0)
    assert trace.events_of(EventKind.LLM_ERROR)
    assert [e.data["reason"] for e in trace.events_of(EventKind.LLM_REQUEST_START)] == [
        "end of user turn", "retry after error"]
    assert trace.spoken_text() == ANSWER


def test_cascade_is_deterministic_on_the_virtual_clock():
    a, b = run_cascade(), run_cascade()
    assert a.to_json() == b.to_json()
    np.testing.assert_array_equal(a.output_audio, b.output_audio)


@pytest.mark.slow  # runs on the real-time clock
def test_cascade_runs_on_the_real_time_clock():
    segments, audio = user_input(("hi there", 0.1))
    trace = run_cascade(segments, audio, answer="Hello.", clock=RealTimeClock(), first_chunk_s=0.05,
                        config=CascadeConfig(quiet_after_s=0.3))
    assert trace.config["clock"] == "real-time"
    assert trace.spoken_text() == "Hello."
    assert session_metrics(trace).onset_latency_s is not None


def test_split_sentences():
    assert split_sentences("Pi is 3.14 about. And e", 30) == (["Pi is 3.14 about."], "And e")
    assert split_sentences("Really?! Yes. ", 30) == (["Really?!", "Yes."], "")
    assert split_sentences("one two three four fi", 2) == (["one two"], "three four fi")
    assert split_sentences("one two three four five ", 2) == (["one two", "three four"], "five ")


def test_every_mode_from_one_factory_and_one_scenario_file(tmp_path):
    segments, audio = user_input((QUESTION, 0.5))
    runs = {}
    for mode in ("kame", "moshi", "cascade"):
        front_end = StandInFrontEnd(ToneTTS(), answer_fn=lambda t: "Tokyo, I think.", background=False)
        runner = make_runner(mode, stt=ScriptedSTT(segments), llm=ScriptedLLM(lambda u: ANSWER), tts=ToneTTS(),
                             front_end=front_end)
        runs[mode] = runner.run_sync(audio)
    assert isinstance(make_runner("kame", stt=ScriptedSTT(segments), llm=ScriptedLLM(lambda u: ANSWER),
                                  front_end=EchoFrontEnd()), TandemRunner)
    assert isinstance(make_runner("moshi", stt=ScriptedSTT(segments), front_end=StandInFrontEnd(ToneTTS())),
                      TandemRunner)
    onsets = {mode: session_metrics(trace).onset_latency_s for mode, trace in runs.items()}
    assert onsets["kame"] < onsets["cascade"]
    assert runs["moshi"].spoken_text().endswith("Tokyo, I think.")
    loaded = load_scenario(save_scenario(Scenario(name="japan", runs=runs), tmp_path / "japan.kame"))
    for mode, trace in runs.items():
        assert loaded.runs[mode].to_json() == trace.to_json()
    with pytest.raises(ValueError, match="needs a front-end"):
        make_runner("kame", stt=ScriptedSTT(segments), llm=ScriptedLLM(lambda u: ANSWER))
