"""The live protocol's parts that need no model: message encoding, limits, ids, the sink's messages, the
Talk tab's opener refusing bad ids."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.events import PAYLOADS, OracleReset, SttFinal
from kame_core.serve import protocol as P
from kame_core.serve.session import StreamSink, default_sessions_dir, session_file
from kame_core.session import FrameOut
from kame_core.trace import Event, EventKind, FrameRecord


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


def test_event_json_leaves_out_bulky_fields():
    event = Event(1.23456, EventKind.LLM_REQUEST_START, {"request": 3, "messages": [{"x": 1}], "reason": "final"})
    obj = P.event_json(event)
    assert obj == {"type": "event", "t": 1.235, "kind": "llm_request_start", "data": {"request": 3, "reason": "final"}}


def test_session_ids_never_name_other_paths(tmp_path):
    assert session_file(tmp_path, "talk-20260101-000000-abcd1234") == tmp_path / "talk-20260101-000000-abcd1234.kame"
    for bad in ("../etc/passwd", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(ValueError, match="not a session id"):
            session_file(tmp_path, bad)
    assert default_sessions_dir({"KAME_SESSIONS_DIR": str(tmp_path)}) == tmp_path
    assert default_sessions_dir({"XDG_CACHE_HOME": "/c"}) == __import__("pathlib").Path("/c/kame-studio/sessions")
    assert default_sessions_dir({"KAME_CACHE_DIR": "/k"}) == __import__("pathlib").Path("/k/sessions")


def test_the_sink_sends_events_text_audio_and_the_turn_onset() -> None:
    pytest.importorskip("sphn")
    sent: list[bytes] = []
    sink = StreamSink(sent.extend, pcm_out=True)
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
    assert sink.turns == []  # the turn may still go on: its onset is told once the user stayed silent 1.5 s
    for i in range(8, 40):
        sink.on_frame(FrameOut(i, (i + 1) * 0.08, FrameRecord(text_piece=" x", text_token=5), quiet, loud, ()))
    assert sink.turns == [{"type": "turn_onset", "turn": 0, "user_end": 0.4, "assistant_start": 0.56,
                           "latency_s": 0.16, "delay_s": 0.16, "audio_start": 0.56}]


def test_the_live_onset_is_the_metrics_onset():
    """The same rule live and in Timeline: a response that began before the user finished is negative."""
    from kame_core.metrics import LiveOnsets, turn_onsets
    from kame_core.trace import SessionTrace

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
def test_each_turn_onset_is_followed_by_its_latency_breakdown_as_the_timeline_computes_it():
    """``turn_latency``: the anchors and the requests of the closed turn, equal to metrics.latency_breakdown."""
    import json

    from kame_core.metrics import latency_breakdown
    from kame_core.trace import OracleToken, SessionTrace
    from kame_core.trace_query import oracle_token_use

    pytest.importorskip("sphn")
    trace, sent = SessionTrace(mode="kame"), []
    sink = StreamSink(sent.extend, pcm_out=True, trace_of=lambda: trace)
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
    assert "turn_latency" in kinds and kinds.index("turn_latency") == kinds.index("turn_onset") + 1
    got = next(m for m in messages if m["type"] == "turn_latency")
    finished = trace.finish()
    [expected] = latency_breakdown(finished)
    assert got == {"type": "turn_latency", **expected.to_json(oracle_token_use(finished))}
    assert [s["name"] for s in got["steps"]][-1] == "first audible output"
    assert got["steps"][-1]["since_end_s"] == pytest.approx(14 * 0.08 - 0.8, abs=1e-6)
    [request] = got["requests"]
    assert (request["reason"], request["tokens_appended"], request["tokens_fed"], request["tokens_pending"]) == \
        ("pending user text", 3, 1, 2)


def test_the_talk_opener_refuses_a_bad_or_unknown_id(tmp_path):
    from demo import views

    opened = views.open_talk_session("../../secret", None, sessions_dir=tmp_path)
    assert opened.file is None and "not a session id" in opened.status
    opened = views.open_talk_session("talk-unknown", None, sessions_dir=tmp_path)
    assert opened.file is None and "no saved session" in opened.status


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

    from kame_core.trace import OracleToken, SessionTrace

    pytest.importorskip("sphn")
    sent: list[bytes] = []
    trace = SessionTrace(mode="kame")
    sink = StreamSink(sent.extend, pcm_out=True, trace_of=lambda: trace)
    quiet = np.zeros(1920, np.float32)

    def messages() -> list[dict]:
        found = [json.loads(m[1:]) for m in sent if m[0] == P.EVENT]
        sent.clear()
        return [m for m in found if m.get("type") in ("hint_level", "oracle_heard")]

    reset = trace.record(0.5, OracleReset(revision=1, request=1))
    sink.on_frame(FrameOut(7, 0.64, FrameRecord(oracle=OracleToken(token=64, revision=1, is_start=True)),
                           quiet, quiet, (reset,)))
    assert messages() == [{"type": "oracle_heard", "frame": 7, "t": 0.56, "revision": 1}]
    trace.events[-1] = Event(0.5, EventKind.ORACLE_RESET, {**reset.data, "hint_level": 3, "spoken_ratio": 0.9})
    final = trace.record(1.0, SttFinal(text="what is it"))
    sink.on_frame(FrameOut(8, 0.72, FrameRecord(), quiet, quiet, (final,)))
    assert messages() == [{"type": "hint_level", "revision": 1, "hint_level": 3, "spoken_ratio": 0.9}]
    again = trace.record(1.1, SttFinal(text=""))
    sink.on_frame(FrameOut(9, 0.8, FrameRecord(), quiet, quiet, (again,)))
    assert messages() == []  # told once; only a changed level is told again


def test_a_talk_session_opens_only_with_the_claim_of_the_page_that_made_it(tmp_path):
    from demo import views
    from kame_core.pipelines.stack import Stack
    from kame_core.session import SessionStore
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
        assert refused.file is None and "not made in this browser session" in refused.status, wrong
    opened = views.open_talk_session(f"{sid} {claim}", None, sessions_dir=tmp_path)
    assert opened.file is not None and opened.session.loaded.origin == "live"
    with pytest.raises(ValueError, match="hex"):
        store.save_claim(sid, "short")
