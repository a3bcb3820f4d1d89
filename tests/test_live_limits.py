"""The live server's limits against hostile clients, on a stack of doubles (no models, real sockets, the
real-time clock): clients that never send, go quiet, never stop, or send valid but abusive Opus. Each is closed
with a clear reason and its place given back; the server goes on serving the next user."""
from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from kame_core.pipelines.stack import Stack
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import protocol as P
from kame_core.serve.server import served_stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at
from kame_core.testing.servers import serving
from kame_core.testing.waiting import wait_until

websockets = pytest.importorskip("websockets")
sphn = pytest.importorskip("sphn")


def _doubles(question: str = "what is the capital of france") -> Stack:
    """Scripted STT and LLM, the echoing front-end, tone speech: no model anywhere."""
    return Stack(make_stt=lambda: ScriptedSTT([words_at(question, 0.2)]), make_front_end=EchoFrontEnd,
                 llm=ScriptedLLM(lambda _: "paris"), tts=ToneTTS())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    stack = _doubles()
    server = ChatServer(lambda: served_stack(stack), max_sessions=2, sessions_dir=tmp_path_factory.mktemp("s"),
                        limits=Limits(first_audio_s=1.0, idle_s=1.0, max_wall_s=3.0, max_bad_messages=50,
                                      max_message_audio_s=2.0))
    with serving(standalone_app(server)) as port:
        yield f"ws://127.0.0.1:{port}/api/chat", server


async def _session(url: str, feed=None) -> tuple[int | None, str, list[dict]]:
    """Connect, run ``feed(ws)`` (if any) while reading until the server closes; (code, reason, JSON messages)."""
    seen: list[dict] = []
    async with websockets.connect(url, max_size=None) as ws:
        assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])

        async def read() -> None:
            try:
                while True:
                    data = await asyncio.wait_for(ws.recv(), 20)
                    if isinstance(data, bytes) and data[:1] == bytes([P.EVENT]):
                        seen.append(json.loads(data[1:]))
            except websockets.ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        if feed is not None:
            try:
                await feed(ws)
            except websockets.ConnectionClosed:
                pass
        await reader
        return ws.close_code, ws.close_reason or "", seen


def _wait_idle(server: ChatServer) -> None:
    wait_until(lambda: not server.active, 20, what="every session to give its place back")


def test_an_idle_pair_cannot_lock_out_a_talker(served):
    url, server = served

    async def scenario():
        idle = [asyncio.ensure_future(_session(url)) for _ in range(2)]
        first = await asyncio.gather(*idle)
        talker = await _session(url, lambda ws: ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(4800, np.float32)))))
        return first, talker

    first, talker = asyncio.run(scenario())
    for code, reason, _ in first:
        assert code == P.CLOSE_POLICY and "no audio within 1 s" in reason
    assert talker[0] == P.CLOSE_POLICY and "no audio for 1 s" in talker[1]  # admitted; then it went quiet
    assert any(m.get("type") == "saved" for m in talker[2]), "a session closed by a limit is saved"
    _wait_idle(server)


def test_a_client_that_never_stops_meets_the_wall_clock_limit(served):
    url, server = served

    async def forever(ws):
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 10:
                await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(1920, np.float32))))
                await asyncio.sleep(0.08)
        except websockets.ConnectionClosed:
            pass

    started = time.monotonic()
    code, reason, _ = asyncio.run(_session(url, forever))
    assert code == P.CLOSE_POLICY and "wall-clock limit of 3 s" in reason and time.monotonic() - started < 8
    _wait_idle(server)


def test_valid_but_abusive_opus_is_a_warning_not_a_dead_session(served):
    url, server = served
    writer = sphn.OpusStreamWriter(24000)
    batch = b"".join(writer.append_pcm(np.zeros(1920, np.float32)) for _ in range(100))  # ~8 s in one message
    other = sphn.OpusStreamWriter(24000)
    pages = [other.append_pcm(np.zeros(1920, np.float32)) for _ in range(5)]
    out_of_order = b"".join(p for p in (pages[3], pages[0], pages[4]) if p)
    garbage = b"OggS" + bytes(range(200))

    async def abuse(ws):
        for payload in (batch, out_of_order, garbage):
            await ws.send(P.message(P.AUDIO, payload))
        await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(4800, np.float32))))  # still a session
        await asyncio.sleep(0.5)
        await ws.send(P.json_message({"type": "end"}))

    code, reason, seen = asyncio.run(_session(url, abuse))
    warnings = [m["message"] for m in seen if m.get("type") == "warning"]
    assert code == P.CLOSE_NORMAL, (code, reason, warnings)
    assert any("over 2 s" in w for w in warnings) or any("does not decode" in w for w in warnings), warnings
    assert any(m.get("type") == "saved" and m["frames"] > 0 for m in seen)
    _wait_idle(server)


def test_health_readiness_and_metrics_follow_the_sessions(tmp_path):
    server = ChatServer(lambda: served_stack(_doubles("hello there")), max_sessions=2, sessions_dir=tmp_path,
                        limits=Limits(first_audio_s=1.5, idle_s=1.0))
    with serving(standalone_app(server)) as port:
        _check_health_readiness_and_metrics(server, port)


def _check_health_readiness_and_metrics(server: ChatServer, port: int) -> None:
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(base + path, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    assert get("/healthz") == (200, "alive\n")
    code, body = get("/readyz")
    assert code == 503 and "not loaded" in body  # listening, but no model loaded yet: not ready
    server.preload()
    code, body = get("/readyz")
    assert code == 200 and json.loads(body)["free_slots"] == 2

    async def two_idle():
        idle = [asyncio.ensure_future(_session(f"ws://127.0.0.1:{port}/api/chat")) for _ in range(2)]
        await asyncio.to_thread(wait_until, lambda: server.active == 2, 10, what="both idle clients admitted")
        busy = await asyncio.to_thread(get, "/readyz")
        return busy, await asyncio.gather(*idle)

    busy, closed = asyncio.run(two_idle())
    assert busy[0] == 503 and json.loads(busy[1])["free_slots"] == 0
    assert all(c[0] == P.CLOSE_POLICY for c in closed)
    _wait_idle(server)
    assert get("/readyz")[0] == 200
    talk = asyncio.run(_session(f"ws://127.0.0.1:{port}/api/chat", lambda ws: ws.send(
        P.message(P.PCM, P.pcm_to_bytes(np.zeros(24000, np.float32))))))
    assert talk[0] == P.CLOSE_POLICY
    _wait_idle(server)
    code, text = get("/metrics")
    assert code == 200
    values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert values["kame_sessions_started_total"] == 3 and values["kame_sessions_active"] == 0
    assert values['kame_sessions_closed_total{code="1008"}'] == 3
    assert values["kame_frames_total"] >= 12  # the talker's second of audio, frame by frame


def test_access_refuses_cross_site_pages_and_clients_without_the_token():
    from kame_core.access import Access

    open_ = Access()
    assert open_.refusal({}, {}) is None                                            # a program: no Origin
    assert open_.refusal({"origin": "http://127.0.0.1:7860", "host": "127.0.0.1:7860"}, {}) is None  # its page
    assert "cross-site" in open_.refusal({"origin": "https://evil.example", "host": "127.0.0.1:7860"}, {})
    allowed = Access(allowed_origins=frozenset({"https://lab.example"}))
    assert allowed.refusal({"origin": "https://lab.example/", "host": "x:1"}, {}) is None
    locked = Access(token="s3cret")
    assert "token" in locked.refusal({}, {})
    assert "token" in locked.refusal({}, {"token": "s3cre"})
    assert locked.refusal({}, {"token": "s3cret"}) is None
    assert locked.refusal({"x-kame-token": "s3cret"}, {}) is None
    assert locked.refusal({"authorization": "Bearer s3cret"}, {}) is None
    assert locked.refusal({"origin": "http://h:1", "host": "h:1"}, {}) is None       # the app's own page
    assert Access.from_env({"KAME_TOKEN": " t ", "KAME_ALLOWED_ORIGINS": "https://A.example/, "}) == \
        Access(token="t", allowed_origins=frozenset({"https://a.example"}))
    # the command line adds to the environment's policy by the same rule
    widened = Access(token="t", allowed_origins=frozenset({"https://a.example"})).with_options(
        token=None, origins=["https://B.example/"])
    assert widened == Access(token="t", allowed_origins=frozenset({"https://a.example", "https://b.example"}))
    assert Access(token="t").with_options(token="u", origins=[]).token == "u"
    with pytest.raises(ValueError, match=r"--allow-origin must be web origins .*'lab\.example' is not an origin"):
        Access().with_options(token=None, origins=["lab.example"])


def test_a_cross_site_page_and_a_wrong_token_are_closed_before_any_session(tmp_path):
    from kame_core.access import Access

    server = ChatServer(lambda: served_stack(_doubles("hello")), max_sessions=1, sessions_dir=tmp_path,
                        access=Access(token="s3cret"))
    server.preload()
    with serving(standalone_app(server)) as port:
        _check_access(server, f"ws://127.0.0.1:{port}/api/chat")


def _check_access(server: ChatServer, url: str) -> None:
    async def closed(target: str, **headers) -> tuple[int | None, str]:
        async with websockets.connect(target, additional_headers=headers or None) as ws:
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            return ws.close_code, ws.close_reason or ""

    code, reason = asyncio.run(closed(url + "?token=s3cret", Origin="https://evil.example"))
    assert code == P.CLOSE_POLICY and "cross-site" in reason
    code, reason = asyncio.run(closed(url + "?token=wrong"))
    assert code == P.CLOSE_POLICY and "token" in reason
    assert server.active == 0 and server.results == []  # no session was ever started

    async def with_token():
        async with websockets.connect(url + "?token=s3cret") as ws:
            return await asyncio.wait_for(ws.recv(), 10)

    assert asyncio.run(with_token()) == bytes([P.HANDSHAKE])


def test_a_raw_connection_that_never_sends_a_request_is_closed(tmp_path):
    from kame_core.serve.server import http_protocol

    server = ChatServer(lambda: None, sessions_dir=tmp_path)  # never loaded: nobody gets that far
    with serving(standalone_app(server), http=http_protocol(), timeout_keep_alive=1) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            started = time.monotonic()
            assert raw.recv(1) == b""  # the server closed it (a timeout here would raise)
            assert time.monotonic() - started < 5
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            assert reply.status == 200  # ordinary requests are served as before


def test_an_oversized_message_is_refused_from_its_header_before_its_payload_arrives(tmp_path):
    """A frame header announcing 8 MiB (under uvicorn's default 16 MiB limit) is answered with 1009 at once:
    the server never waits for, nor buffers, the payload."""
    import struct

    from kame_core.serve.server import uvicorn_options

    server = ChatServer(lambda: served_stack(_doubles()), sessions_dir=tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server)) as port:
        async def announce_big() -> tuple[int | None, float]:
            async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat", max_size=None) as ws:
                assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])
                header = bytes([0x82, 0x80 | 127]) + struct.pack("!Q", 8 * 2 ** 20) + b"\x00\x00\x00\x00"
                ws.transport.write(header + bytes([P.AUDIO]) + b"\x00" * 1024)  # the header and 1 kB, no more
                started = time.monotonic()
                await asyncio.wait_for(ws.wait_closed(), 10)
                return ws.close_code, time.monotonic() - started

        code, after = asyncio.run(announce_big())
    assert code == P.CLOSE_TOO_BIG and after < 5
