"""The live protocol (``/api/chat``) with a Python client (websockets + sphn) against a real server on the
CPU stack (faster-whisper, stand-in front-end, SmolLM2 oracle, Piper), run by uvicorn in a thread.

Questions are spoken by Piper and streamed in real time, as a microphone would.
"""
from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from kame_core.analysis.metrics import stt_word_lags
from kame_core.analysis.trace_query import llm_requests
from kame_core.protocols import Synthesis
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import protocol as P
from kame_core.serve.client import talk
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving
from kame_core.testing.waiting import wait_until

pytestmark = pytest.mark.slow  # Whisper, SmolLM2, Piper, real time

websockets = pytest.importorskip("websockets")
pytest.importorskip("sphn")

FRANCE = "What is the capital of France?"
SPIDER = "How many legs does a spider have?"
MAX_SESSION_S = 40.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(ws url, ChatServer) of a server on a free port; at most 2 sessions; sessions saved in a tmp folder."""
    server = ChatServer(stack_from_cpu(small_model_openers=False), max_sessions=2,
                        sessions_dir=tmp_path_factory.mktemp("sessions"),
                        limits=Limits(max_session_s=MAX_SESSION_S, max_bad_messages=8))
    with serving(standalone_app(server), log_level="warning") as port:
        yield f"ws://127.0.0.1:{port}/api/chat", server


@pytest.fixture(scope="module")
def spoken() -> dict[str, Synthesis]:
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    return {text: tts.synthesize(text) for text in (FRANCE, SPIDER)}


@pytest.fixture(scope="module")
def questions(spoken: dict[str, Synthesis]) -> dict[str, np.ndarray]:
    return {text: synthesis.audio for text, synthesis in spoken.items()}


def _run(coro):
    return asyncio.run(coro)


def _wait_results(server: ChatServer, n: int, timeout: float = 90.0) -> None:
    wait_until(lambda: len(server.results) >= n, timeout, 0.2, what="the session to end on the server")


async def _open(url: str):
    ws = await websockets.connect(url, max_size=None)
    first = await asyncio.wait_for(ws.recv(), 300)
    return ws, first


async def _closed(ws) -> tuple[int | None, str | None]:
    """Read until the server closes the connection; its close code and reason."""
    with pytest.raises(websockets.ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 20)
    return ws.close_code, ws.close_reason


async def _recv_until(ws, predicate, timeout: float = 20.0):
    """Messages until one satisfies ``predicate`` (returned)."""
    end = time.monotonic() + timeout
    while True:
        data = await asyncio.wait_for(ws.recv(), max(0.1, end - time.monotonic()))
        if predicate(data):
            return data


def _warning(data) -> bool:
    return isinstance(data, bytes) and data[:1] == bytes([P.EVENT]) and b'"warning"' in data


def test_handshake_first_then_a_spoken_question_is_answered_in_audio_and_text(served, questions, spoken):
    url, server = served
    result = _run(talk(url, questions[FRANCE], tail_s=5.0))  # the server answers on after the end
    heard = result.live_trace()  # what the client was told live, read as a trace
    assert heard.events and {e.kind for e in heard.events} >= {EventKind.STT_PARTIAL, EventKind.LLM_REQUEST_START}
    lags = dict(zip([w.text for w in spoken[FRANCE].words], stt_word_lags(heard, spoken[FRANCE].words)))
    assert lags["France?"] is not None, lags  # a live partial or final within 6 s of the word's audio said it
    assert result.first_kind == P.HANDSHAKE
    assert result.session["id"].startswith("talk-") and "stt" in result.session["components"]
    out = result.output
    assert len(out) > 24000 and float(np.sqrt(np.mean(out ** 2))) > 0.01, "non-silent assistant audio"
    assert result.text and result.words.strip(), "inner-monologue pieces came as kind 0x02"
    partials = [e["data"]["text"] for e in result.trace_events("stt_partial") + result.trace_events("stt_final")]
    assert any("france" in p.lower() for p in partials), partials
    # each partial says the end of the audio it was decoded from: how late it came is its time less that
    decoded = [(e["t"], e["data"]["audio_to_s"]) for e in result.trace_events("stt_partial")]
    assert decoded and all(0 < upto <= t for t, upto in decoded), decoded
    assert result.trace_events("llm_request_start"), "the oracle LLM was asked"
    assert result.of_type("turn_onset"), "the delay before the assistant started is reported"
    saved = result.saved()
    assert saved is not None and result.close_code == P.CLOSE_NORMAL
    scenario = load_scenario(server.sessions_dir / saved["file"])
    trace = scenario.runs["kame"]
    assert trace.n_frames == saved["frames"] and trace.provenance["stt"]
    assert float(np.abs(trace.output_audio).max()) > 0.02


def test_raw_pcm_clients_are_answered_in_raw_pcm(served, questions):
    url, _ = served
    result = _run(talk(url, questions[SPIDER], tail_s=4.0, pcm=True))
    assert result.first_kind == P.HANDSHAKE and result.session["audio_out"] == "pcm"
    assert len(result.output) >= 24000 * 5, "one 1920-sample PCM frame per 80 ms"
    assert float(np.abs(result.output).max()) > 0.02


def test_two_sessions_at_once_stay_isolated(served, questions):
    url, server = served

    async def both():
        return await asyncio.gather(talk(url, questions[FRANCE], tail_s=5.0),
                                    talk(url, questions[SPIDER], tail_s=5.0, lead_s=0.5))

    france, spider = _run(both())
    assert france.session["id"] != spider.session["id"]

    def heard(result) -> str:
        return " ".join(e["data"]["text"].lower()
                        for e in result.trace_events("stt_partial") + result.trace_events("stt_final"))

    assert "france" in heard(france) and "spider" not in heard(france)
    assert "spider" in heard(spider) and "france" not in heard(spider)
    own_words = {"france": ("capital", "france"), "spider": ("spider", "legs", "how many")}
    for result, word, other in ((france, "france", "spider"), (spider, "spider", "france")):
        trace = load_scenario(server.sessions_dir / result.saved()["file"]).runs["kame"]
        transcripts = " ".join(r.transcript.lower() for r in llm_requests(trace))
        assert any(w in transcripts for w in own_words[word]), f"{word}: its LLM heard its user: {transcripts}"
        assert not any(w in transcripts for w in own_words[other]), f"{word}: its LLM heard the other user"


def test_a_disconnect_mid_answer_saves_a_scenario_and_cancels_the_llm(served, questions):
    url, server = served
    before = len(server.results)
    result = _run(talk(url, questions[FRANCE], tail_s=2.5, end=False))  # leaves without a word
    assert result.saved() is None
    _wait_results(server, before + 1)
    ended = server.results[-1]
    assert ended.reason == "client disconnected" and ended.close_code is None
    trace = load_scenario(ended.path).runs["kame"]
    assert trace.n_frames >= 40 and float(np.abs(trace.user_audio).max()) > 0.05
    requests = llm_requests(trace)
    assert requests and all(r.outcome != "open" for r in requests), "no LLM stream is left running"
    assert server.active == 0


def test_bad_input_is_refused_with_warnings_then_a_close_and_the_server_goes_on(served):
    url, server = served

    async def scenario():
        ws, first = await _open(url)
        assert first == bytes([P.HANDSHAKE])
        for bad in ("a text frame", b"", bytes([0x05]) + b"unknown kind", bytes([P.AUDIO]) + b"this is not opus",
                    bytes([P.PCM]) + b"odd", bytes([P.EVENT]) + b"{not json"):
            await ws.send(bad)
            warning = await _recv_until(ws, _warning)
            assert b"message" in warning
        # still a working session: audio in -> audio out
        await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(1920 * 4, np.float32))))
        await _recv_until(ws, lambda d: isinstance(d, bytes) and d[:1] == bytes([P.AUDIO]))
        for _ in range(5):  # past max_bad_messages (8): closed with 1003
            await ws.send(b"")
        return await _closed(ws)

    code, reason = _run(scenario())
    assert code == P.CLOSE_UNSUPPORTED and "not the protocol" in reason

    async def too_big():
        ws, _ = await _open(url)
        await ws.send(bytes([P.PCM]) + bytes(2 * 200_000))
        return await _closed(ws)

    code, reason = _run(too_big())
    assert code == P.CLOSE_TOO_BIG and "limit" in reason

    async def endless():
        ws, _ = await _open(url)
        second = P.message(P.PCM, P.pcm_to_bytes(np.full(24000, 0.001, np.float32)))
        with pytest.raises(websockets.ConnectionClosed):
            for _ in range(int(MAX_SESSION_S) + 5):
                await ws.send(second)
                await asyncio.sleep(0.02)
            while True:
                await asyncio.wait_for(ws.recv(), 20)
        return ws.close_code, ws.close_reason

    code, reason = _run(endless())
    assert code == P.CLOSE_POLICY and "length limit" in reason
    wait_until(lambda: server.active == 0, 60, what="every one of these sessions to end on the server")


def test_past_the_session_limit_a_client_is_refused_with_1013(served):
    url, server = served

    async def scenario():
        first = await _open(url)
        second = await _open(url)
        third = await websockets.connect(url, max_size=None)
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(third.recv(), 20)
        refused = third.close_code, third.close_reason
        for ws, _ in (first, second):
            await ws.close()
        return refused

    code, reason = _run(scenario())
    assert code == P.CLOSE_TRY_LATER and "busy" in reason
    wait_until(lambda: server.active == 0, 60, what="the sessions to end on the server")
