"""Typed event payloads (kame_core.record.events): one dataclass per kind, what ``record`` writes, what ``payload_of``
reads, and that the writers' traces are the same JSON after a save and a load."""
from __future__ import annotations

import dataclasses
import json

import pytest

from kame_core.clock import VirtualClock
from kame_core.oracle.config import OracleConfig
from kame_core.pipelines.cascade import CascadeRunner
from kame_core.pipelines.tandem import TandemRunner
from kame_core.record import events as ev
from kame_core.record.events import check_event_data
from kame_core.record.schema import PayloadError
from kame_core.record.trace import Event, EventKind, SessionTrace
from kame_core.scenario import Scenario, load_scenario, save_scenario
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS
from kame_core.testing.sessions import answer_for, mountain_session, session_audio_and_segments


def test_every_kind_has_one_payload_class_with_a_check_on_every_field():
    assert set(ev.PAYLOADS) == set(EventKind)
    for kind, cls in ev.PAYLOADS.items():
        assert cls.kind is kind and dataclasses.is_dataclass(cls)
        assert all(callable(f.metadata["check"]) for f in dataclasses.fields(cls))
    required, optional = ev.field_checks(EventKind.ORACLE_APPEND)
    assert list(required) == ["request", "revision", "text"] and list(optional) == ["tokens"]
    required, optional = ev.field_checks(EventKind.ORACLE_RESET)
    assert list(required) == ["revision"] and "request" in optional and "hint_level" in optional


def test_record_writes_the_given_fields_then_the_extras():
    trace = SessionTrace(mode="kame")
    cancel = trace.record(1.0, ev.LlmRequestCancel(request=3, revision=None, text="it is"), reason="superseded")
    assert cancel.kind is EventKind.LLM_REQUEST_CANCEL
    assert list(cancel.data.items()) == [("request", 3), ("revision", None), ("text", "it is"),
                                         ("reason", "superseded")]  # an explicit None is written; late is not
    reset = trace.record(1.0, ev.OracleReset(request=3, revision=2))
    assert list(reset.data) == ["request", "revision"]  # hint level, ratio, text, transcript: absent
    assert trace.record(1.0, ev.SttFinal(text="hi")).data == {"text": "hi"}
    with pytest.raises(ValueError, match="what"):
        trace.record(1.0, ev.Note(what="x"), what="y")
    with pytest.raises(TypeError):
        ev.SttFinal("positional")  # type: ignore[misc]
    assert [e.kind for e in trace.events] == [EventKind.LLM_REQUEST_CANCEL, EventKind.ORACLE_RESET,
                                              EventKind.STT_FINAL]


def test_payload_of_reads_defaults_ignores_extras_and_refuses_a_missing_required_field():
    event = Event(2.0, EventKind.LLM_REQUEST_FINISH, {"request": 4, "text": "paris", "time_inferred": True})
    finish = ev.payload_of(event)
    assert finish == ev.LlmRequestFinish(request=4, text="paris")
    assert finish.revision is None and finish.chunks is None and not hasattr(finish, "time_inferred")
    broken = Event(2.0, EventKind.ORACLE_APPEND, {"request": 1, "text": "x"})
    with pytest.raises(PayloadError) as info:
        ev.payload_of(broken)
    assert info.value.field == "data.revision"
    assert ev.payload_of(broken, lenient=True) == ev.OracleAppend(request=1, revision=None, text="x")  # type: ignore
    trace = SessionTrace(mode="kame", events=[broken, Event(3.0, EventKind.ORACLE_APPEND,
                                                            {"request": 1, "revision": 1, "text": "y"})])
    assert [p.text for _, p in ev.payloads(trace, ev.OracleAppend)] == ["y"]
    assert [p.text for _, p in ev.payloads(trace, ev.OracleAppend, lenient=True)] == ["x", "y"]


def test_what_a_writer_records_passes_the_load_time_checks():
    for payload in (ev.LlmRequestStart(request=1, reason="final", transcript="hi", transcript_t=None, messages=[]),
                    ev.SelfCorrection(frame=3, abandoned_text="a", abandoned_frames=[1, 2], revision=None,
                                      new_text="b"),
                    ev.TurnBoundary(to="user", assistant_said="", interrupted=False),
                    ev.ResponseOnset(turn=0, user_end=1.0, latency_s=0.5, audio_latency_s=None)):
        check_event_data(payload.kind, payload.to_data(), "d")


def test_a_default_is_written_only_when_given_and_read_back_where_absent():
    """A front-end's report and the recorded event are one class: its texts and frames default to empty (typed
    without None), a default the writer did not give stays out of the file, one it gave is written."""
    report = ev.SelfCorrection(abandoned_text="Sydney", revision=2, heard_oracle_frame=7)
    assert report.to_data() == {"abandoned_text": "Sydney", "revision": 2, "heard_oracle_frame": 7}
    assert (report.new_text, report.abandoned_frames) == ("", ())
    given = ev.SelfCorrection(frame=9, abandoned_text="", abandoned_frames=[], revision=None, new_text="")
    assert given.to_data() == {"frame": 9, "abandoned_text": "", "abandoned_frames": [], "revision": None,
                               "new_text": ""}
    read = ev.payload_of(Event(1.0, EventKind.SELF_CORRECTION, {"frame": 9}))
    assert isinstance(read, ev.SelfCorrection)
    assert (read.abandoned_text, read.abandoned_frames, read.new_text, read.revision) == ("", (), "", None)
    assert read.to_data() == {"frame": 9}  # a read payload writes back what it read, nothing more


def _tandem(policy: str, **llm) -> SessionTrace:
    segments, audio = session_audio_and_segments(30.0)
    config = SessionConfig(oracle=OracleConfig(policy=policy), max_tail_s=0.0, quiet_after_s=0.0, title=policy)
    return TandemRunner(EchoFrontEnd(), ScriptedSTT(segments), ScriptedLLM(answer_for, **llm), config,
                        VirtualClock()).run_sync(audio)


def _cascade(**llm) -> SessionTrace:
    segments, audio = session_audio_and_segments(30.0)
    return CascadeRunner(ScriptedSTT(segments), ScriptedLLM(answer_for, **llm), ToneTTS(),
                         VirtualClock()).run_sync(audio)


WRITERS = {
    "mountain": lambda: mountain_session("kame", 300),                     # forced delay: holds, onsets
    "restart-slow": lambda: _tandem("restart", first_chunk_s=1.2, per_chunk_s=0.3),   # cancels before a revision
    "restart-ignore-cancel": lambda: _tandem("restart", first_chunk_s=0.9, ignore_cancel=True),  # late cancels
    "emission": lambda: _tandem("emission", first_chunk_s=0.9, per_chunk_s=0.2, ignore_cancel=True, fail_after=3,
                                fail_times=2),                              # errors, late cancels with reasons
    "cascade": lambda: _cascade(fail_after=0, fail_times=2),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_writers_traces_round_trip_through_a_file_and_through_their_payloads(writer, tmp_path):
    trace = WRITERS[writer]()
    kinds = {e.kind for e in trace.events}
    assert {EventKind.LLM_REQUEST_START, EventKind.STT_FINAL} <= kinds
    saved = save_scenario(Scenario(name=writer, runs={"run": trace}), tmp_path / f"{writer}.kame")
    loaded = load_scenario(saved).runs["run"]
    assert json.dumps(loaded.to_json()) == json.dumps(trace.to_json())  # same JSON, fields in the same order
    rebuilt = SessionTrace(mode=trace.mode)
    for e in loaded.events:
        payload = ev.payload_of(e)
        extra = {k: v for k, v in e.data.items() if k not in payload.to_data()}
        assert list(rebuilt.record(e.t, payload, **extra).data.items()) == list(e.data.items()), e
