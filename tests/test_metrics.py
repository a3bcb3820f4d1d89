"""Metrics on hand-built traces: onsets ignore answers carried over into a new turn; STT word lags."""
from __future__ import annotations

import pytest

from kame_core.analysis.metrics import stt_word_lags, turn_onsets
from kame_core.clock import FRAME_SECONDS
from kame_core.protocols import Word
from kame_core.record.events import SttFinal, SttPartial, UserSpeechEnd, UserSpeechStart
from kame_core.record.trace import FrameRecord, SessionTrace, silence


def trace_with(speaking_frames: set[int], n: int, user: list[tuple[float, float]]) -> SessionTrace:
    trace = SessionTrace(mode="cascade")
    for i in range(n):
        record = FrameRecord(text_piece=" word", text_token=1) if i in speaking_frames else FrameRecord()
        trace.append_frame(record, silence(), silence())
    for start, end in user:
        trace.record(start, UserSpeechStart(audio_t=start))
        trace.record(end, UserSpeechEnd(audio_t=end))
    return trace.finish()


def frames(start_s: float, end_s: float, every: int = 3) -> set[int]:
    """A word every ``every`` frames from start to end (pauses shorter than the carry-over gap)."""
    return set(range(round(start_s / FRAME_SECONDS), round(end_s / FRAME_SECONDS), every))


def test_an_answer_still_running_when_the_user_speaks_again_is_not_the_new_turns_onset():
    # turn 0: 0.5-2.0 s, answer 3.0-11.0 s; turn 1: 10.0-12.0 s, new answer from 13.6 s
    trace = trace_with(frames(3.0, 11.0) | frames(13.6, 16.0), 220, [(0.5, 2.0), (10.0, 12.0)])
    onsets = turn_onsets(trace)
    assert onsets[0].latency_s == pytest.approx(1.0, abs=FRAME_SECONDS)
    assert onsets[1].latency_s == pytest.approx(1.6, abs=FRAME_SECONDS)


def test_an_early_start_during_the_users_speech_still_counts_as_negative_latency():
    trace = trace_with(frames(1.2, 4.0), 80, [(0.5, 2.0)])
    assert turn_onsets(trace)[0].latency_s == pytest.approx(-0.8, abs=FRAME_SECONDS)


def test_stt_word_lags_from_word_end_to_first_update_containing_it():
    trace = SessionTrace(mode="kame")
    trace.record(1.0, SttPartial(text="What is"))
    trace.record(1.3, SttPartial(text="What is the capital?"))
    trace.record(2.0, SttFinal(text="What is the capital of France?", words=[]))
    spoken = [Word("What", 0.5, 0.7), Word("is", 0.7, 0.9), Word("the", 0.9, 1.0), Word("capital", 1.0, 1.4),
              Word("of", 1.4, 1.5), Word("France?", 1.5, 1.9), Word("Paris", 5.0, 5.4)]
    lags = stt_word_lags(trace, spoken)
    assert lags[:6] == pytest.approx([0.3, 0.1, 0.3, -0.1, 0.5, 0.1])
    assert lags[6] is None  # never recognised
