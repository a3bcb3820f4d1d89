"""Hint levels of every oracle revision: the ratio table, the spoken-ratio arithmetic, traces and live runs."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kame_core.analysis.hint_levels import hint_level, spoken_ratio
from kame_core.analysis.metrics import record_hint_levels
from kame_core.analysis.trace_query import oracle_revisions, request_spoken_ratios
from kame_core.clock import FRAME_SECONDS, VirtualClock
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record.events import (
    HintLevel,
    LlmRequestStart,
    OracleReset,
    SttFinal,
    SttPartial,
    UserSpeechEnd,
    UserSpeechStart,
)
from kame_core.record.trace import EventKind, SessionTrace
from kame_core.session.config import SessionConfig

from .doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at


@pytest.mark.parametrize(("ratio", "level"), [
    (0.0, 0), (0.5, 0), (math.nextafter(0.5, 1), 1), (0.65, 1), (math.nextafter(0.65, 1), 2), (0.8, 2),
    (math.nextafter(0.8, 1), 3), (0.95, 3), (math.nextafter(0.95, 1), 4), (0.99, 4),
    (math.nextafter(0.99, 1), 5), (1.0, 5),
])
def test_level_table_bounds_belong_to_the_lower_level(ratio: float, level: int) -> None:
    assert hint_level(ratio) == level


def test_level_of_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        hint_level(float("nan"))


def test_spoken_ratio_pending_words_of_the_open_utterance() -> None:
    # utterance 1: 4 words (done), utterance 2: 6 words; the request heard 3 of utterance 2
    assert spoken_ratio(7, 4, [4, 10]) == pytest.approx(3 / 6)
    # no pending words right after the final of utterance 1: all of it heard
    assert spoken_ratio(4, 4, [4, 10]) == 1.0
    # a multi-final utterance: 2 of its 6 words committed by a first final, nothing pending
    assert spoken_ratio(6, 6, [4, 10]) == pytest.approx(2 / 6)
    # a partial holding more words than the final is clipped to 1
    assert spoken_ratio(12, 4, [4, 10]) == 1.0
    # the open utterance never got its final
    assert spoken_ratio(12, 10, [4, 10]) is None
    with pytest.raises(ValueError, match="increasing"):
        spoken_ratio(1, 0, [3, 3])


def _trace(segments: list[tuple[float, float]] | None = None) -> SessionTrace:
    """Requests asked at 2, 4 and 6 of 8 words, then after the final; a second question after it."""
    trace = SessionTrace(mode="kame")
    for start, end in segments or []:
        trace.record(start, UserSpeechStart(audio_t=start))
        trace.record(end, UserSpeechEnd(audio_t=end))
    question = "what is the capital city of france please"
    for k, n in enumerate([2, 4, 6]):
        t = 1.0 + k
        trace.record(t, SttPartial(text=" ".join(question.split()[:n])))
        trace.record(t + 0.1, LlmRequestStart(request=k + 1, transcript=" ".join(question.split()[:n])))
        trace.record(t + 0.4, OracleReset(request=k + 1, revision=k + 1))
    trace.record(4.5, SttFinal(text=question))
    trace.record(4.6, LlmRequestStart(request=4, transcript=question))
    trace.record(5.0, OracleReset(request=4, revision=4))
    trace.record(9.0, LlmRequestStart(request=5, transcript=question + " and of"))
    trace.record(9.4, OracleReset(request=5, revision=5))
    trace.events.sort(key=lambda e: e.t)
    return trace


def test_levels_are_recorded_once_and_read_back_not_worked_out_by_the_reader() -> None:
    trace = _trace()
    assert [r.hint_level for r in oracle_revisions(trace)] == [None] * 5  # nothing recorded: the reader works none out
    record_hint_levels(trace)
    revisions = oracle_revisions(trace)
    assert [r.spoken_ratio for r in revisions[:4]] == pytest.approx([2 / 8, 4 / 8, 6 / 8, 1.0])
    assert [r.hint_level for r in revisions] == [0, 0, 2, 5, None]  # the last question never got its final
    assert 5 not in request_spoken_ratios(trace)


def test_a_file_saved_before_levels_were_events_is_read_from_its_resets() -> None:
    trace = _trace()
    trace.events = [type(e)(e.t, e.kind, {**e.data, "hint_level": 3, "spoken_ratio": 0.9})
                    if e.kind is EventKind.ORACLE_RESET and e.data["revision"] == 1 else e for e in trace.events]
    assert (oracle_revisions(trace)[0].hint_level, oracle_revisions(trace)[0].spoken_ratio) == (3, 0.9)


def test_finals_of_one_turn_make_one_utterance() -> None:
    trace = _trace(segments=[(0.5, 2.2), (2.6, 4.2)])  # a 0.4 s pause: one turn of two segments
    trace.record(2.5, SttFinal(text="what is the capital"))
    trace.events.sort(key=lambda e: e.t)
    trace.events = [type(e)(e.t, e.kind, {**e.data, "text": "city of france please"})
                    if e.kind is EventKind.STT_FINAL and e.t == 4.5 else e for e in trace.events]
    ratios = request_spoken_ratios(trace)
    assert ratios[1] == pytest.approx(2 / 8) and ratios[3] == pytest.approx(6 / 8) and ratios[4] == 1.0


def test_an_event_tells_its_revisions_level_and_leaves_the_others_read_from_their_resets() -> None:
    """A file with levels on its resets (saved before levels were events) and a hint_level event for one revision
    only (or for a revision it does not have): each revision keeps what was recorded for it."""
    trace = _trace()
    trace.events = [type(e)(e.t, e.kind, {**e.data, "hint_level": 3, "spoken_ratio": 0.9})
                    if e.kind is EventKind.ORACLE_RESET else e for e in trace.events]
    trace.record(9.9, HintLevel(revision=2, hint_level=1, spoken_ratio=0.6))
    trace.record(9.9, HintLevel(revision=999, hint_level=5, spoken_ratio=1.0))
    assert [(r.hint_level, r.spoken_ratio) for r in oracle_revisions(trace)] == \
        [(3, 0.9), (1, 0.6), (3, 0.9), (3, 0.9), (3, 0.9)]


def test_record_writes_one_event_per_revision_and_again_only_when_a_level_changes() -> None:
    trace = _trace(segments=[(0.5, 4.4)])  # one turn: the finals it gets make one utterance
    written = record_hint_levels(trace, 4.5)
    assert [(e.t, e.data["revision"], e.data["hint_level"], e.data["spoken_ratio"]) for e in written] == \
        [(4.5, 1, 0, 0.25), (4.5, 2, 0, 0.5), (4.5, 3, 2, 0.75), (4.5, 4, 5, 1.0)]
    assert record_hint_levels(trace) == []  # nothing new: nothing written
    assert all(e.data.get("hint_level") is None for e in trace.events_of(EventKind.ORACLE_RESET))  # resets untouched
    # a second final of the same utterance makes it longer: every level read from it changes, once
    trace.record(4.55, SttFinal(text="and of spain"))
    changed = record_hint_levels(trace, 4.6)
    assert [(e.data["revision"], e.data["hint_level"]) for e in changed] == [(1, 0), (2, 0), (3, 1), (4, 2), (5, 3)]
    assert [r.spoken_ratio for r in oracle_revisions(trace)] == pytest.approx([2 / 11, 4 / 11, 6 / 11, 8 / 11, 10 / 11])


def test_every_revision_of_a_live_run_carries_its_level_when_the_final_arrives() -> None:
    question = "what is the capital city of france"
    segments = [words_at(question, 0.5)]
    audio = speech_like([(0.5, segments[0][-1].end)], segments[0][-1].end + 1.0)
    llm = ScriptedLLM(lambda u: "paris is the capital of france")
    runner = TandemRunner(EchoFrontEnd(), ScriptedSTT(segments), llm, SessionConfig(), VirtualClock())
    trace = runner.run_sync(audio)
    resets = trace.events_of(EventKind.ORACLE_RESET)
    assert len(resets) >= 2
    (final,) = trace.events_of(EventKind.STT_FINAL)
    levels_at = {e.data["revision"]: e.t for e in trace.events_of(EventKind.HINT_LEVEL)}
    # the revisions asked before the final have their level by the frame after it; a later one, as it starts
    for reset in resets:
        assert levels_at[reset.data["revision"]] - max(final.t, reset.t) <= FRAME_SECONDS + 1e-9
    assert len(trace.events_of(EventKind.HINT_LEVEL)) == len(resets)  # written once each
    revisions = oracle_revisions(trace)
    levels = [r.hint_level for r in revisions if r.hint_level is not None]
    ratios = [r.spoken_ratio for r in revisions if r.spoken_ratio is not None]
    assert len(levels) == len(ratios) == len(revisions) and ratios == sorted(ratios)
    assert levels[0] < 5 and levels[-1] == 5
    words = len(question.split())
    for r in revisions:
        request = next(e for e in trace.events_of(EventKind.LLM_REQUEST_START) if e.data["request"] == r.request)
        assert r.spoken_ratio == pytest.approx(min(1.0, len(request.data["transcript"].split()) / words))
    assert np.isfinite(ratios).all()
