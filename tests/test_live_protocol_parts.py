"""The live protocol's parts that need no model: message encoding, limits, ids, the sink's messages, the
Talk tab's opener refusing bad ids."""
from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable

import numpy as np
import pytest

from kame_core.record.events import PAYLOADS, HintLevel, OracleReset, SttFinal
from kame_core.record.trace import Event, EventKind, FrameRecord, SessionTrace
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.serve.frame_sinks import Runner, connection_sinks, frame_messages
from kame_core.serve.session import default_sessions_dir, session_file
from kame_core.session import FrameOut
from kame_core.session.fan_out import FrameFanOut


def test_messages_split_and_pcm_round_trip():
    assert P.split(P.message(P.TEXT, b"hi")) == (P.TEXT, b"hi")
    with pytest.raises(P.ProtocolError, match="empty message"):
        P.split(b"")
    audio = np.linspace(-1, 1, 1920, dtype=np.float32)
    back = P.pcm_from_bytes(P.pcm_to_bytes(audio))
    assert np.allclose(back, audio, atol=1e-4)
    with pytest.raises(P.ProtocolError, match="not whole 16-bit"):
        P.pcm_from_bytes(b"abc")


def test_ogg_pages_are_told_from_other_bytes():
    sphn = pytest.importorskip("sphn")
    pages = sphn.OpusStreamWriter(24000).append_pcm(np.zeros(1920, np.float32))
    assert P.looks_like_ogg(pages)
    assert not P.looks_like_ogg(b"this is not opus at all, no, not at all")
    assert not P.looks_like_ogg(b"OggS")


def test_a_live_event_leaves_out_bulky_fields():
    event = Event(1.23456, EventKind.LLM_REQUEST_START, {"request": 3, "messages": [{"x": 1}], "reason": "final"})
    obj = N.TraceEvent.of(event).to_json()
    assert obj == {"type": "event", "t": 1.235, "kind": "llm_request_start", "data": {"request": 3, "reason": "final"}}


def test_client_messages_are_read_bounded_and_exactly_and_the_docs_table_lists_every_message():
    assert N.read_client_message(P.split(P.notice(N.End()))[1]) == N.End()
    for bad, why in ((b'{"type": "pause"}', "unknown control message"), (b'{"kind": "end"}', "unknown control"),
                     (b'{"type": 3}', "unknown control"), (b'{"type": "end", "now": true}', "has no field 'now'"),
                     (b"[" * 50 + b"]" * 50, "nested"), (b"\xff", "UTF-8")):
        with pytest.raises(P.ProtocolError, match=why):
            N.read_client_message(bad)
    from tests.shared_data import REPO

    rows = re.findall(r'^\| `\{"type": "(\w+)"((?:, "\w+")*)\}` \| (server → client|client → server) \|',
                      (REPO / "docs" / "protocol.md").read_text(), re.M)
    documented = {(name, direction): [f.strip(' "') for f in fields.split(",") if f.strip()]
                  for name, fields, direction in rows}
    wanted = {(cls.type, "server → client"): [f.name for f in dataclasses.fields(cls)] for cls in N.SERVER_MESSAGES}
    wanted.update({(name, "client → server"): [f.name for f in dataclasses.fields(cls)]
                   for name, cls in N.CLIENT_MESSAGES.items()})
    assert documented == wanted


def test_session_ids_never_name_other_paths(tmp_path):
    assert session_file(tmp_path, "talk-20260101-000000-abcd1234") == tmp_path / "talk-20260101-000000-abcd1234.kame"
    for bad in ("../etc/passwd", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(ValueError, match="not a session id"):
            session_file(tmp_path, bad)
    assert default_sessions_dir({"KAME_SESSIONS_DIR": str(tmp_path)}) == tmp_path
    assert default_sessions_dir({"XDG_CACHE_HOME": "/c"}) == __import__("pathlib").Path("/c/kame-studio/sessions")
    assert default_sessions_dir({"KAME_CACHE_DIR": "/k"}) == __import__("pathlib").Path("/k/sessions")


def sinks(post: Callable[[list[bytes]], None], trace: SessionTrace | None = None,
          run_figures: Runner | None = None) -> FrameFanOut:
    """A connection's sinks (raw PCM out), in the order a live session gives them a frame."""
    return FrameFanOut(connection_sinks(post, pcm_out=True, trace_of=lambda: trace, run_figures=run_figures))


def test_a_frames_own_messages_are_its_events_oracle_start_text_and_audio_in_order() -> None:
    import json

    start = Event(0.1, EventKind.USER_SPEECH_START, {"audio_t": 0.0})
    partial = Event(0.1, EventKind.STT_PARTIAL, {"text": "hi"})
    from kame_core.record.trace import OracleToken

    record = FrameRecord(text_piece=" Paris", text_token=5, oracle=OracleToken(token=64, revision=2, is_start=True))
    quiet = np.zeros(1920, np.float32)
    out = frame_messages(FrameOut(3, 0.32, record, quiet, quiet, (start, partial)), b"\x08audio")
    assert [m[0] for m in out] == [P.EVENT, P.EVENT, P.EVENT, P.TEXT, P.PCM]
    assert json.loads(out[2][1:]) == {"type": "oracle_heard", "frame": 3, "t": 0.24, "revision": 2}
    assert [json.loads(m[1:])["kind"] for m in out[:2]] == ["user_speech_start", "stt_partial"]
    assert out[3][1:] == b" Paris"
    assert out[-1] == b"\x08audio"
    assert frame_messages(FrameOut(4, 0.4, FrameRecord(), quiet, quiet, ()), None) == []  # no Opus page yet


def test_the_sink_sends_events_text_audio_and_the_turn_onset() -> None:
    import json

    pytest.importorskip("sphn")
    sent: list[bytes] = []
    sink = sinks(sent.extend)

    def onsets() -> list[dict]:
        return [m for m in (json.loads(m[1:]) for m in sent if m[0] == P.EVENT) if m["type"] == "turn_onset"]
    quiet, loud = np.zeros(1920, np.float32), np.full(1920, 0.2, np.float32)
    start = Event(0.1, EventKind.USER_SPEECH_START, {"audio_t": 0.0})
    end = Event(0.5, EventKind.USER_SPEECH_END, {"audio_t": 0.4})
    sink.on_frame(FrameOut(0, 0.08, FrameRecord(), quiet, quiet, (start,)))
    assert [m[0] for m in sent] == [P.EVENT, P.PCM]
    for i in range(1, 6):
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, FrameRecord(), quiet, quiet, ()))
    sink.on_frame(FrameOut(6, 0.56, FrameRecord(), quiet, quiet, (end,)))
    sent.clear()
    sink.on_frame(FrameOut(7, 0.64, FrameRecord(text_piece=" Paris", text_token=5), quiet, loud, ()))
    assert [m[0] for m in sent] == [P.TEXT, P.PCM]
    assert sent[0][1:] == b" Paris" and len(sent[1]) == 1 + 2 * 1920
    for i in range(8, 22):
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, FrameRecord(text_piece=" x", text_token=5), quiet, loud, ()))
    assert onsets() == []  # the turn may still go on: its onset is told once the user stayed silent 1.5 s
    for i in range(22, 40):
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, FrameRecord(text_piece=" x", text_token=5), quiet, loud, ()))
    assert onsets() == [{"type": "turn_onset", "turn": 0, "user_end": 0.4, "assistant_start": 0.56,
                           "latency_s": 0.16, "delay_s": 0.16, "audio_start": 0.56}]


def test_the_live_onset_is_the_metrics_onset():
    """The same rule live and in Timeline: a response that began before the user finished is negative."""
    from kame_core.analysis.metrics import LiveOnsets, turn_onsets
    from kame_core.record.trace import SessionTrace

    trace, live, reported = SessionTrace(mode="kame"), LiveOnsets(), []
    speech = {0: (EventKind.USER_SPEECH_START, 0.0), 10: (EventKind.USER_SPEECH_END, 0.8),
              40: (EventKind.USER_SPEECH_START, 3.2), 50: (EventKind.USER_SPEECH_END, 4.0)}
    for i in range(90):
        events = []
        if i in speech:
            kind, at = speech[i]
            events.append(trace.record(at, PAYLOADS[kind](audio_t=at)))
        talking = 7 <= i < 20 or 52 <= i < 70   # the first answer starts before the user finished
        out = np.full(1920, 0.1 if talking else 0.0, np.float32)
        record = FrameRecord(text_piece=" w", text_token=5) if talking else FrameRecord()
        trace.append_frame(record, np.zeros(1920, np.float32), out)
        reported += live.add_frame(talking, float(np.sqrt(np.mean(out ** 2))), events)
    assert reported == turn_onsets(trace.finish())
    assert [round(o.latency_s, 2) for o in reported] == [-0.24, 0.16]
def test_a_turns_latency_breakdown_is_sent_from_its_speech_end_as_the_timeline_computes_it():
    """``turn_latency``: the anchors and the requests of the turn, equal to metrics.latency_breakdown; the row
    is there once the user's speech ended (before the turn's onset), and the last one sent is the Timeline's."""
    import json

    from kame_core.analysis.metrics import latency_breakdown
    from kame_core.analysis.trace_query import oracle_token_use
    from kame_core.record.trace import OracleToken, SessionTrace

    pytest.importorskip("sphn")
    trace, sent = SessionTrace(mode="kame"), []
    sink = sinks(sent.extend, trace, at_once)
    script = {0: [(EventKind.USER_SPEECH_START, {"audio_t": 0.0})],
              5: [(EventKind.LLM_REQUEST_START, {"request": 1, "reason": "pending user text", "transcript": "how"})],
              7: [(EventKind.LLM_FIRST_CHUNK, {"request": 1}),
                  (EventKind.ORACLE_RESET, {"revision": 1, "request": 1}),
                  (EventKind.ORACLE_APPEND, {"request": 1, "revision": 1, "text": " it is far",
                                             "tokens": [11, 12, 13]})],
              10: [(EventKind.USER_SPEECH_END, {"audio_t": 0.8})],
              12: [(EventKind.STT_FINAL, {"text": "how far is the moon"})]}
    for i in range(40):
        events = tuple(trace.record(i * 0.08, PAYLOADS[kind](**data)) for kind, data in script.get(i, ()))
        talking = 14 <= i < 30
        oracle = (OracleToken(token=0, revision=1, is_start=True) if i == 8 else
                  OracleToken(token=11, piece=" it", revision=1) if i == 9 else OracleToken())
        record = FrameRecord(text_piece=" w" if talking else "", text_token=5 if talking else None, oracle=oracle)
        out = np.full(1920, 0.1 if talking else 0.0, np.float32)
        trace.append_frame(record, np.zeros(1920, np.float32), out)
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, record, np.zeros(1920, np.float32), out, events))
    messages = [json.loads(m[1:]) for m in sent if m[0] == P.EVENT]
    kinds = [m["type"] for m in messages]
    assert "turn_onset" in kinds and kinds.index("turn_latency") < kinds.index("turn_onset")
    first = next(m for m in messages if m["type"] == "turn_latency")
    assert first["user_end"] == 0.8 and first["steps"][1] == {"name": "STT final", "t": None, "since_end_s": None}
    got = [m for m in messages if m["type"] == "turn_latency"][-1]
    finished = trace.finish()
    [expected] = latency_breakdown(finished)
    assert got == {"type": "turn_latency", **expected.to_json(oracle_token_use(finished))}
    assert [s["name"] for s in got["steps"]][-1] == "first audible output"
    assert got["steps"][-1]["since_end_s"] == pytest.approx(14 * 0.08 - 0.8, abs=1e-6)
    [request] = got["requests"]
    assert (request["reason"], request["tokens_appended"], request["tokens_fed"], request["tokens_pending"]) == \
        ("pending user text", 3, 1, 2)


def at_once(work: Callable[[], None]) -> None:
    """Runs the sink's figures at once, on the caller's thread: each frame's messages are all out when it returns."""
    work()


def _play_two_turns(sink: FrameFanOut, trace: SessionTrace, frame_done: Callable[[], None] = lambda: None) -> None:
    """Plays :func:`_two_turns` into ``trace`` and ``sink`` frame by frame as the driver does (its HINT_LEVEL events
    recorded with the frame's; ``frame_done`` after each frame), then ends the session: the stream still running
    cancelled, the trace finished, its onsets and levels stored, ``sink.on_end``."""
    from kame_core.analysis.metrics import HINT_LEVEL_NEWS, annotate_onsets, record_hint_levels
    from kame_core.record.events import LlmRequestCancel
    from kame_core.record.trace import OracleToken

    script, talking, fed = _two_turns()
    for i in range(76):
        events = tuple(trace.record(i * 0.08, PAYLOADS[kind](**data)) for kind, data in script.get(i, ()))
        if any(e.kind in HINT_LEVEL_NEWS for e in events):
            events += tuple(record_hint_levels(trace, i * 0.08))
        rev, start = fed.get(i, (None, False))
        oracle = OracleToken() if rev is None else OracleToken(token=0 if start else 9, piece="" if start else " x",
                                                               revision=rev, is_start=start)
        record = FrameRecord(text_piece=" w" if i in talking else "", text_token=5 if i in talking else None,
                             oracle=oracle)
        out = np.full(1920, 0.1 if i in talking else 0.0, np.float32)
        trace.append_frame(record, np.zeros(1920, np.float32), out)
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, record, np.zeros(1920, np.float32), out, events))
        frame_done()
    trace.record(6.1, LlmRequestCancel(request=3, revision=3, text=" also"))
    trace.finish()
    annotate_onsets(trace)
    record_hint_levels(trace)
    sink.on_end()


def _two_turns() -> tuple[dict[int, list[tuple[EventKind, dict]]], set[int], dict[int, tuple[int, bool]]]:
    """A scripted two-turn session: its events per frame, the frames KAME talks in, and the oracle token fed per
    frame (revision, start token?). Turn 0's answer (request 2) adopts its revision only after the turn's onset
    (and after its last final: its level is never stored while the session runs); request 3 of turn 1 is still
    streaming when the session ends (the driver cancels it then)."""
    script: dict[int, list[tuple[EventKind, dict]]] = {
        1: [(EventKind.USER_SPEECH_START, {"audio_t": 0.0})],
        5: [(EventKind.LLM_REQUEST_START, {"request": 1, "reason": "pending user text", "transcript": "how far"})],
        7: [(EventKind.LLM_FIRST_CHUNK, {"request": 1, "revision": 1}),
            (EventKind.ORACLE_RESET, {"revision": 1, "request": 1}),
            (EventKind.ORACLE_APPEND, {"request": 1, "revision": 1, "text": " it is", "tokens": [11, 12]})],
        11: [(EventKind.USER_SPEECH_END, {"audio_t": 0.8})],
        12: [(EventKind.STT_FINAL, {"text": "how far is the moon"})],
        13: [(EventKind.LLM_REQUEST_START, {"request": 2, "reason": "final", "transcript": "how far is the moon"})],
        33: [(EventKind.LLM_FIRST_CHUNK, {"request": 2, "revision": 2}),
             (EventKind.ORACLE_RESET, {"revision": 2, "request": 2}),
             (EventKind.LLM_REQUEST_CANCEL, {"request": 1, "revision": 1, "text": " it is"}),
             (EventKind.ORACLE_APPEND, {"request": 2, "revision": 2, "text": " far away", "tokens": [21, 22]})],
        35: [(EventKind.ORACLE_APPEND, {"request": 2, "revision": 2, "text": " indeed", "tokens": [23, 24, 25]})],
        45: [(EventKind.LLM_REQUEST_FINISH, {"request": 2, "revision": 2, "text": " far away indeed"})],
        50: [(EventKind.USER_SPEECH_START, {"audio_t": 4.0})],
        55: [(EventKind.LLM_REQUEST_START, {"request": 3, "reason": "pending user text",
                                            "transcript": "how far is the moon and the"})],
        61: [(EventKind.USER_SPEECH_END, {"audio_t": 4.8})],
        62: [(EventKind.STT_FINAL, {"text": "and the sun"})],
        66: [(EventKind.LLM_FIRST_CHUNK, {"request": 3, "revision": 3}),
             (EventKind.ORACLE_RESET, {"revision": 3, "request": 3}),
             (EventKind.ORACLE_APPEND, {"request": 3, "revision": 3, "text": " also", "tokens": [31]})]}
    talking = set(range(16, 30)) | set(range(64, 72))
    fed = {8: (1, True), 9: (1, False), 34: (2, True), **{i: (2, False) for i in range(35, 40)}, 67: (3, True)}
    return script, talking, fed


def test_turn_latency_and_hint_levels_follow_the_session_and_end_as_the_saved_trace_has_them() -> None:
    """The live table does not freeze at a turn's onset: steps and request outcomes that come later are sent again
    (only on change, and never for a turn that is done), every revision's hint level is sent once known (from the
    HINT_LEVEL events the driver records with the frame's events), and after :meth:`FrameFanOut.on_end` the last
    message of each turn and revision equals what the saved trace gives (latency_breakdown, oracle_revisions)."""
    import json

    from kame_core.analysis.metrics import latency_breakdown
    from kame_core.analysis.trace_query import oracle_revisions, oracle_token_use
    from kame_core.record.trace import SessionTrace

    pytest.importorskip("sphn")
    trace = SessionTrace(mode="kame")
    sent: list[bytes] = []
    sink = sinks(sent.extend, trace, at_once)
    by_frame: list[list[dict]] = []

    def frame_done() -> None:
        by_frame.append([json.loads(m[1:]) for m in sent if m[0] == P.EVENT and b'"type": "event"' not in m])
        sent.clear()

    _play_two_turns(sink, trace, frame_done)
    by_frame.append([json.loads(m[1:]) for m in sent if m[0] == P.EVENT])

    def latency(frame: int, turn: int) -> dict | None:
        return next((m for m in by_frame[frame] if m["type"] == "turn_latency" and m["turn"] == turn), None)

    def sent_at(frame: int, turn: int) -> dict:
        found = latency(frame, turn)
        assert found is not None, f"no turn_latency for turn {turn} at frame {frame}"
        return found

    def step(message: dict, name: str) -> float | None:
        return next(s["t"] for s in message["steps"] if s["name"] == name)

    onset_frame = next(i for i, ms in enumerate(by_frame) if any(m["type"] == "turn_onset" for m in ms))
    assert step(sent_at(11, 0), "STT final") is None  # the row is there from the end of the speech
    assert step(sent_at(12, 0), "STT final") == pytest.approx(0.96)
    before_chunk = [m for i in range(33) if (m := latency(i, 0)) is not None][-1]
    assert onset_frame < 33 and step(before_chunk, "first chunk") is None
    at_chunk = sent_at(33, 0)  # after the onset: the answer's first chunk and reset are sent when they come
    assert step(at_chunk, "first chunk") == pytest.approx(33 * 0.08) == step(at_chunk, "oracle reset")
    assert [r["outcome"] for r in at_chunk["requests"]] == ["cancelled", "open"]
    assert [r["outcome"] for r in sent_at(45, 0)["requests"]] == ["cancelled", "finished"]
    fed_on = [i for i in range(34, 45) if latency(i, 0) is not None]
    assert fed_on and all(b - a >= 5 for a, b in zip(fed_on, fed_on[1:]))  # token counts: at most every 5 frames
    turn_0 = [m for ms in by_frame for m in ms if m["type"] == "turn_latency" and m["turn"] == 0]
    assert all(a != b for a, b in zip(turn_0, turn_0[1:]))  # sent only when it reads differently
    assert not any(latency(i, 0) for i in range(67, len(by_frame)))  # done: followed, ended, superseded
    [streaming] = sent_at(66, 1)["requests"]  # turn 1's request (asked before its final) becomes revision 3
    assert (streaming["revision"], streaming["outcome"], streaming["tokens_appended"]) == (3, "open", 1)
    # the end: every turn's last breakdown and every revision's last level is the saved trace's
    last = {m["turn"]: m for ms in by_frame for m in ms if m["type"] == "turn_latency"}
    expected = {t.turn: {"type": "turn_latency", **t.to_json(oracle_token_use(trace))}
                for t in latency_breakdown(trace)}
    assert last == expected and [r["outcome"] for r in last[1]["requests"]] == ["cancelled"]
    assert step(last[1], "first audible output") == pytest.approx(64 * 0.08)
    levels = {m["revision"]: m["hint_level"] for ms in by_frame for m in ms if m["type"] == "hint_level"}
    saved = {r.revision: r.hint_level for r in oracle_revisions(trace)}
    assert levels == saved and None not in saved.values() and set(saved) == {1, 2, 3}
    told = {m["revision"]: i for i, ms in enumerate(by_frame) for m in reversed(ms) if m["type"] == "hint_level"}
    assert told == {1: 12, 2: 33, 3: 66}  # as soon as known: at the final, or at the reset that came after it


def test_the_breakdowns_are_worked_out_off_the_frame_loop_and_end_with_the_saved_ones():
    """By default a turn's breakdown is worked out on a worker thread of the sink's own: the frame loop's thread
    only copies the trace so far. Its messages still come in order, and after :meth:`FrameFanOut.on_end` (which waits
    for the work under way) the last one of each turn is the saved trace's; the worker is gone then."""
    import json

    from kame_core.analysis.metrics import latency_breakdown
    from kame_core.analysis.trace_query import oracle_token_use
    from kame_core.record.trace import SessionTrace

    pytest.importorskip("sphn")
    trace = SessionTrace(mode="kame")
    sent: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def post(messages: list[bytes]) -> None:
        with lock:
            sent.extend((threading.get_ident(), m) for m in messages)

    sink = sinks(post, trace)
    _play_two_turns(sink, trace)
    me = threading.get_ident()
    notices = [(thread, json.loads(m[1:])) for thread, m in sent if m[0] == P.EVENT]
    latencies = [(thread, m) for thread, m in notices if m["type"] == "turn_latency"]
    threads = [thread for thread, _ in latencies]
    ended = threads.index(me) if me in threads else len(threads)  # from on_end (the session's thread)
    assert ended >= 1 and me not in threads[:ended] and set(threads[ended:]) <= {me}  # live ones: the worker's
    assert not [t for t in threading.enumerate() if t.name.startswith("turn-latency")]  # on_end closed it
    last = {m["turn"]: m for _, m in latencies}
    expected = {t.turn: {"type": "turn_latency", **t.to_json(oracle_token_use(trace))}
                for t in latency_breakdown(trace)}
    assert last == expected and [r["outcome"] for r in last[1]["requests"]] == ["cancelled"]
    turn_0 = [m for _, m in latencies if m["turn"] == 0]
    steps = [[s["t"] for s in m["steps"]] for m in turn_0]
    assert all(sum(a is not None for a in x) <= sum(b is not None for b in y) for x, y in zip(steps, steps[1:]))


@pytest.mark.parametrize("name", ["05-two-turn-capitals", "07-interruption-eiffel-tower"])
def test_the_window_of_the_open_turns_breaks_them_down_as_the_whole_trace_does(name):
    """What the sink breaks down live (metrics.latency_window from turn k on) is what the Timeline gets from the
    whole trace for those turns -- steps, requests and oracle token counts."""
    from pathlib import Path

    from kame_core.analysis.metrics import latency_breakdown, latency_window, turn_onsets
    from kame_core.analysis.trace_query import oracle_token_use
    from kame_core.scenario import load_scenario

    trace = load_scenario(Path(__file__).parent.parent / "scenarios" / f"{name}.kame").runs["kame"]
    onsets, use = turn_onsets(trace), oracle_token_use(trace)
    whole = [turn.to_json(use) for turn in latency_breakdown(trace, onsets=onsets)]
    assert len(whole) >= 2 and any(r["tokens_fed"] for turn in whole for r in turn["requests"])
    for k in range(len(whole) + 1):
        window = latency_window(trace, k)
        assert len(window.events) < len(trace.events) or k == 0
        part = latency_breakdown(window, onsets=onsets[k:])
        assert [turn.to_json(oracle_token_use(window)) for turn in part] == whole[k:]


def test_the_talk_opener_refuses_a_bad_or_unknown_id(tmp_path):
    from demo.open import views

    opened = views.open_talk_session("../../secret", None, sessions_dir=tmp_path)
    assert opened.file is None and "not a session id" in opened.status
    opened = views.open_talk_session("talk-unknown", None, sessions_dir=tmp_path)
    assert opened.file is None and "no talk session 'talk-unknown' made in this browser session" in opened.status


def test_a_stack_that_cannot_load_closes_with_1011_and_the_server_goes_on(tmp_path):
    import asyncio

    websockets = pytest.importorskip("websockets")

    from kame_core.serve import ChatServer, standalone_app
    from kame_core.testing.servers import serving

    calls = []

    def broken():
        calls.append(1)
        raise OSError("no model files here")

    server = ChatServer(broken, max_sessions=1, sessions_dir=tmp_path)

    async def connect():
        async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat") as ws:
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return ws.close_code, ws.close_reason

    with serving(standalone_app(server)) as port:
        for _ in range(2):  # the slot is given back: the second client is told the same, not "busy"
            code, reason = asyncio.run(connect())
            assert code == P.CLOSE_INTERNAL and "OSError" in reason
        assert len(calls) == 2 and server.active == 0


def test_the_sink_says_which_revision_is_heard_and_its_hint_level_once_known() -> None:
    import json

    from kame_core.record.trace import OracleToken, SessionTrace

    pytest.importorskip("sphn")
    sent: list[bytes] = []
    trace = SessionTrace(mode="kame")
    sink = sinks(sent.extend, trace, at_once)
    quiet = np.zeros(1920, np.float32)

    def messages() -> list[dict]:
        found = [json.loads(m[1:]) for m in sent if m[0] == P.EVENT]
        sent.clear()
        return [m for m in found if m.get("type") in ("hint_level", "oracle_heard")]

    reset = trace.record(0.5, OracleReset(revision=1, request=1))
    sink.on_frame(FrameOut(7, 0.64, FrameRecord(oracle=OracleToken(token=64, revision=1, is_start=True)),
                           quiet, quiet, (reset,)))
    assert messages() == [{"type": "oracle_heard", "frame": 7, "t": 0.56, "revision": 1}]
    final = trace.record(1.0, SttFinal(text="what is it"))
    sink.on_frame(FrameOut(8, 0.72, FrameRecord(), quiet, quiet, (final,)))
    assert messages() == []  # the sink works no level out: it tells the ones the driver records
    level = trace.record(1.04, HintLevel(revision=1, hint_level=3, spoken_ratio=0.9, request=1))
    sink.on_frame(FrameOut(9, 0.8, FrameRecord(), quiet, quiet, (level,)))
    assert messages() == [{"type": "hint_level", "revision": 1, "hint_level": 3, "spoken_ratio": 0.9}]
    again = trace.record(1.1, HintLevel(revision=1, hint_level=3, spoken_ratio=0.9, request=1))
    sink.on_frame(FrameOut(10, 0.88, FrameRecord(), quiet, quiet, (again,)))
    assert messages() == []  # told once; only a changed level is told again
    changed = trace.record(1.2, HintLevel(revision=1, hint_level=2, spoken_ratio=0.8, request=1))
    sink.on_frame(FrameOut(11, 0.96, FrameRecord(), quiet, quiet, (changed,)))
    assert messages() == [{"type": "hint_level", "revision": 1, "hint_level": 2, "spoken_ratio": 0.8}]


def test_a_talk_session_opens_only_with_the_claim_of_the_page_that_made_it(tmp_path):
    from demo.open import views
    from kame_core.session import SessionStore
    from kame_core.stacks.stack import Stack
    from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at

    stack = Stack(make_stt=lambda: ScriptedSTT([words_at("hello there", 0.2)]), make_front_end=EchoFrontEnd,
                  llm=ScriptedLLM(lambda _: "hi"), tts=ToneTTS())
    with stack.session("kame") as runner:
        trace = runner.run_sync(np.zeros(24000, np.float32))
    store, sid, claim = SessionStore(tmp_path), "talk-20260101-000000-abcdef01", "ab" * 32
    store.save(sid, {"kame": trace}, title="Talk session (live protocol)", components="doubles")
    store.save_claim(sid, claim)
    assert (tmp_path / f"{sid}.claim").read_text() != claim  # only its hash is kept
    for wrong in (sid, f"{sid} {'cd' * 32}", f"{sid} {claim[:-2]}", f"{sid} not-hex"):
        refused = views.open_talk_session(wrong, None, sessions_dir=tmp_path)
        # a wrong claim reads as no saved session at all: a stranger learns nothing of which ids exist
        unknown = views.open_talk_session(wrong.replace(sid, "talk-20260101-000000-abcdef09"), None,
                                          sessions_dir=tmp_path)
        assert refused.file is None and refused.status == unknown.status.replace("abcdef09", "abcdef01"), wrong
    opened = views.open_talk_session(f"{sid} {claim}", None, sessions_dir=tmp_path)
    assert opened.file is not None and opened.session.loaded.origin == "live"
    with pytest.raises(ValueError, match="hex"):
        store.save_claim(sid, "short")


def test_a_talk_session_a_replica_saved_opens_from_the_sessions_folder_above_it(tmp_path):
    """``KAME_REPLICAS``: replica K saves in ``<sessions dir>/replica-K``; the Talk tab, given the sessions folder,
    finds the session there (with its claim), never through a link named like a replica folder."""
    from demo.open import views
    from kame_core.serve.replicas import replica_dir
    from kame_core.session import SessionStore
    from kame_core.session.store import saving_folder
    from kame_core.stacks.stack import Stack
    from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at

    stack = Stack(make_stt=lambda: ScriptedSTT([words_at("hello there", 0.2)]), make_front_end=EchoFrontEnd,
                  llm=ScriptedLLM(lambda _: "hi"), tts=ToneTTS())
    with stack.session("kame") as runner:
        trace = runner.run_sync(np.zeros(24000, np.float32))
    folder, sid, claim = replica_dir(tmp_path, 1), "talk-20260101-000000-abcdef02", "ef" * 32
    store = SessionStore(folder)
    store.save(sid, {"kame": trace}, title="Talk session (live protocol)", components="doubles")
    store.save_claim(sid, claim)
    assert saving_folder(tmp_path, sid) == folder and saving_folder(tmp_path, "talk-none") == tmp_path
    opened = views.open_talk_session(f"{sid} {claim}", None, sessions_dir=tmp_path)
    assert opened.file is not None and opened.session.loaded.origin == "live", opened.status
    refused = views.open_talk_session(f"{sid} {'cd' * 32}", None, sessions_dir=tmp_path)
    assert refused.file is None and f"no talk session {sid!r} made in this browser session" in refused.status
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    SessionStore(elsewhere).save("talk-20260101-000000-abcdef03", {"kame": trace}, title="t", components="d")
    (tmp_path / "replica-9").symlink_to(elsewhere, target_is_directory=True)
    assert saving_folder(tmp_path, "talk-20260101-000000-abcdef03") == tmp_path  # a link is not a replica's folder
    with pytest.raises(ValueError, match="not a session id"):
        saving_folder(tmp_path, "../replica-1/x")
