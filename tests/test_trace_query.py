"""The one way to read a trace (kame_core.analysis.trace_query), the metrics derived from it, payload validation and
SessionConfig's round trip -- on hand-made traces whose answers are known."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.analysis.metrics import annotate_onsets, transcript_to_oracle
from kame_core.analysis.trace_query import (
    llm_requests,
    oracle_revisions,
    problems,
    revision_at,
    self_corrections,
    user_turns,
)
from kame_core.clock import FRAME_SECONDS, SAMPLES_PER_FRAME
from kame_core.oracle.config import OracleConfig
from kame_core.record.events import (
    LlmError,
    LlmFirstChunk,
    LlmRequestCancel,
    LlmRequestFinish,
    LlmRequestStart,
    OracleAppend,
    OracleReset,
    ResponseOnset,
    SttFinal,
    SttPartial,
    UserSpeechEnd,
    UserSpeechStart,
    check_event_data,
)
from kame_core.record.schema import PayloadError
from kame_core.record.trace import EventKind, FrameRecord, OracleToken, SessionTrace
from kame_core.session.config import SessionConfig
from kame_core.testing.sessions import mountain_session

SILENT = np.zeros(SAMPLES_PER_FRAME, np.float32)
LOUD = np.full(SAMPLES_PER_FRAME, 0.2, np.float32)


def hand_made() -> SessionTrace:
    """User speaks 0.0-1.0 s; request 1 (partial) is cancelled by request 2 (final), whose answer is fed from
    frame 15; request 3 fails. The front-end says 'paris' at frames 20-21."""
    trace = SessionTrace(mode="kame")
    ev = trace.record
    ev(0.0, UserSpeechStart(audio_t=0.0))
    ev(0.5, SttPartial(text="capital of"))
    ev(0.6, LlmRequestStart(request=1, transcript="capital of", transcript_t=0.5))
    ev(0.9, LlmFirstChunk(request=1, revision=1))
    ev(0.9, OracleReset(revision=1, request=1))
    ev(0.9, OracleAppend(request=1, revision=1, text="it is "))
    ev(1.0, UserSpeechEnd(audio_t=1.0))
    ev(1.1, SttFinal(text="capital of france"))
    ev(1.1, LlmRequestCancel(request=1, revision=1, text="it is "))
    ev(1.1, LlmRequestStart(request=2, transcript="capital of france", transcript_t=1.1))
    ev(1.2, LlmFirstChunk(request=2, revision=2))
    ev(1.2, OracleReset(revision=2, request=2))
    ev(1.2, OracleAppend(request=2, revision=2, text="paris "))
    ev(1.3, LlmRequestFinish(request=2, revision=2, text="paris ", chunks=1))
    ev(1.4, LlmRequestStart(request=3, transcript="capital of france"))
    ev(1.5, LlmError(request=3, error="connection refused"))
    for i in range(30):
        oracle = OracleToken()
        if i == 11:
            oracle = OracleToken(token=0, piece="", revision=1, is_start=True)
        elif i == 15:
            oracle = OracleToken(token=0, piece="", revision=2, is_start=True)
        elif i == 16:
            oracle = OracleToken(token=7, piece="paris", revision=2)
        text = "paris" if i == 20 else ""
        trace.append_frame(FrameRecord(text_piece=text, text_token=5 if text else None, oracle=oracle),
                           LOUD if i < 13 else SILENT, LOUD if 20 <= i < 22 else SILENT)
    return trace.finish()


def test_llm_requests_match_start_first_chunk_and_end():
    reqs = {r.request: r for r in llm_requests(hand_made())}
    assert reqs[1].outcome == "cancelled" and reqs[1].first_chunk_t == pytest.approx(0.9)
    assert reqs[2].outcome == "finished" and reqs[2].text.strip() == "paris" and reqs[2].revision == 2
    assert reqs[2].duration_s == pytest.approx(0.2) and reqs[2].transcript == "capital of france"
    assert reqs[3].outcome == "error" and reqs[3].error == "connection refused" and reqs[3].revision is None


def test_oracle_revisions_know_their_request_frames_and_transcript():
    revs = {r.revision: r for r in oracle_revisions(hand_made())}
    assert revs[1].start_frame == 11 and revs[1].transcript == "capital of" and revs[1].outcome == "cancelled"
    assert revs[2].start_frame == 15 and revs[2].last_frame == 16 and revs[2].fed_text.strip() == "paris"
    assert revs[2].transcript_t == pytest.approx(1.1) and revs[2].reached_front_end


def test_revision_at_a_frame_is_the_newest_fed_by_then():
    trace = hand_made()
    assert revision_at(trace, 5) is None
    assert revision_at(trace, 12).revision.revision == 1
    at = revision_at(trace, 25)
    assert at.revision.revision == 2


def test_transcript_to_oracle_delays_and_onsets_from_frames():
    trace = hand_made()
    assert transcript_to_oracle(trace) == pytest.approx([11 * FRAME_SECONDS - 0.5, 15 * FRAME_SECONDS - 1.1])
    trace.record(0.1, ResponseOnset(turn=0, user_end=0.0, latency_s=9.9))   # stale, replaced
    annotate_onsets(trace)
    (onset,) = trace.events_of(EventKind.RESPONSE_ONSET)
    assert onset.t == pytest.approx(20 * FRAME_SECONDS)
    assert onset.data["user_end"] == pytest.approx(1.0)
    assert onset.data["latency_s"] == pytest.approx(20 * FRAME_SECONDS - 1.0, abs=1e-3)
    assert [e.t for e in trace.events] == sorted(e.t for e in trace.events)


def test_user_turns_group_segments_by_the_one_turn_rule():
    trace = SessionTrace(mode="kame")
    for start, end in [(0.0, 1.0), (1.5, 2.0), (5.0, 6.0)]:
        trace.record(start, UserSpeechStart(audio_t=start))
        trace.record(end, UserSpeechEnd(audio_t=end))
    turns = user_turns(trace, turn_gap_s=1.5)
    assert [(t.start, t.end) for t in turns] == [(0.0, 2.0), (5.0, 6.0)]


def test_problems_name_what_failed_and_nothing_on_a_good_run():
    assert problems(mountain_session()) == []
    found = problems(hand_made())
    assert any("failed 1 time(s)" in p and "connection refused" in p for p in found)
    silent = SessionTrace(mode="kame")
    for _ in range(10):
        silent.append_frame(FrameRecord(), SILENT, SILENT)
    found = problems(silent.finish())
    assert any("no speech was heard" in p for p in found) and any("silent" in p for p in found)


def test_self_corrections_carry_the_abandoned_frames_and_heard_revision():
    trace = mountain_session()
    corrections = self_corrections(trace)
    assert corrections
    for _, c in corrections:
        assert c.frame is not None and c.abandoned_frames and max(c.abandoned_frames) < c.frame
        said = " ".join(trace.frames[f].text_piece.strip() for f in c.abandoned_frames)
        assert said == c.abandoned_text
        at = revision_at(trace, c.frame)
        assert at is not None and at.revision.revision == c.revision


@pytest.mark.parametrize("kind,data,field", [
    (EventKind.ORACLE_APPEND, {"revision": 1, "text": "x"}, "request"),
    (EventKind.ORACLE_RESET, {"revision": [1]}, "revision"),
    (EventKind.STT_FINAL, {"text": "a", "words": 5}, "words"),
    (EventKind.ORACLE_APPEND, {"request": 1, "revision": 1, "text": "x", "tokens": [10 ** 400]}, "tokens[0]"),
    (EventKind.USER_SPEECH_START, {"audio_t": "zero"}, "audio_t"),
    (EventKind.STT_FINAL, {"text": "a", "words": [["a", float("nan"), 1.0]]}, "words[0][1]"),
    (EventKind.ORACLE_RESET, {"revision": 1, "hint_level": 6}, "hint_level"),
    (EventKind.LLM_REQUEST_START, {"request": 1, "messages": [{"role": "user"}]}, "messages[0].content"),
])
def test_malformed_payloads_are_refused_naming_the_field(kind, data, field):
    with pytest.raises(PayloadError) as info:
        check_event_data(kind, data, "events[3].data")
    assert info.value.field == f"events[3].data.{field}", info.value


def test_well_formed_payloads_pass_and_unknown_extra_fields_are_tolerated():
    check_event_data(EventKind.ORACLE_APPEND, {"request": 1, "revision": 2, "text": "x", "tokens": [1, 2]}, "d")
    check_event_data(EventKind.STT_PARTIAL, {"text": "hello", "from_a_newer_build": {"a": 1}}, "d")


def test_session_config_round_trips_through_the_trace():
    config = SessionConfig(mode="moshi", oracle=OracleConfig(interval_s=0.25), forced_delay_ms=1500, seed=7,
                           quiet_after_s=0.5, max_tail_s=3.0, title="t")
    trace = SessionTrace(mode="moshi", config=config.to_json())
    again = SessionConfig.from_trace(trace, title="t")
    assert again == config
    assert SessionConfig.from_trace(trace, forced_delay_ms=0).forced_delay_ms == 0
