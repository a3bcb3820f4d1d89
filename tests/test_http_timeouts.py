"""The servers' HTTP side against slow and stuck clients (real sockets, a 1 s head deadline): a request head that
dribbles in or stops half-way is closed at the deadline, however many bytes trickle in; stuck connections are
bounded and time out, and ordinary requests, keep-alive and websocket sessions go on as before."""
from __future__ import annotations

import asyncio
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from kame_core.serve import ChatServer, standalone_app
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.serve.http import connection_limit
from kame_core.serve.server import uvicorn_options
from kame_core.stacks.served import served_stack
from kame_core.testing.doubles import echo_stack
from kame_core.testing.servers import serving

websockets = pytest.importorskip("websockets")

HEAD_S = 1.0
REQUEST_LINE = b"GET /healthz HTTP/1.1\r\n"




def _server(tmp_path) -> ChatServer:
    return ChatServer(lambda: served_stack(echo_stack()), max_sessions=2, sessions_dir=tmp_path)


async def _until_closed(port: int, every_s: float | None, give_up_s: float = 10.0) -> tuple[float, bytes]:
    """Connect, send a request line, then one header byte every ``every_s`` (None: nothing more) until the server
    closes; (seconds from connecting to the close, what the server sent). AssertionError if still open after
    ``give_up_s``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(REQUEST_LINE)
    header = b"X-Slow: " + b"a" * 10_000
    got = b""
    try:
        for sent in range(len(header)):
            if time.monotonic() - started > give_up_s:
                break
            try:
                chunk = await asyncio.wait_for(reader.read(4096), every_s if every_s is not None else give_up_s)
            except asyncio.TimeoutError:
                if every_s is not None:
                    writer.write(header[sent:sent + 1])
                continue
            except ConnectionResetError:
                return time.monotonic() - started, got
            if not chunk:
                return time.monotonic() - started, got
            got += chunk
    finally:
        writer.close()
    raise AssertionError(f"the connection was still open after {give_up_s} s (sent {sent} header bytes)")


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_a_head_dribbling_one_byte_at_a_time_is_closed_at_the_deadline(tmp_path):
    server = _server(tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server, header_timeout_s=HEAD_S)) as port:
        after, got = asyncio.run(_until_closed(port, every_s=0.3))
        assert HEAD_S - 0.2 < after < HEAD_S + 1.0, after  # three bytes came meanwhile: the deadline held
        assert got == b"" or got.startswith(b"HTTP/1.1 408 "), got
        assert _healthz(port) == 200


def test_a_request_line_then_silence_is_closed(tmp_path):
    server = _server(tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server, header_timeout_s=HEAD_S)) as port:
        after, got = asyncio.run(_until_closed(port, every_s=None))
        assert after < HEAD_S + 1.0, after
        assert got == b"" or got.startswith(b"HTTP/1.1 408 "), got


def test_fifty_stuck_clients_time_out_and_health_checks_are_answered_meanwhile(tmp_path):
    server = _server(tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server, header_timeout_s=HEAD_S)) as port:
        async def scenario() -> tuple[list[tuple[float, bytes]], int]:
            stuck = [asyncio.ensure_future(_until_closed(port, every_s=0.3)) for _ in range(50)]
            await asyncio.sleep(0.3)
            during = await asyncio.to_thread(_healthz, port)
            return list(await asyncio.gather(*stuck)), during

        closed, during = asyncio.run(scenario())
        assert during == 200  # 50 stuck connections are well under the default limit
        assert all(after < HEAD_S + 1.0 for after, _ in closed), sorted(after for after, _ in closed)[-3:]
        assert _healthz(port) == 200


def test_past_the_connection_limit_a_client_is_refused_at_once_and_served_once_the_stuck_ones_go(tmp_path):
    server = _server(tmp_path)
    head_s = 2.0  # room for 50 connections and a health check before the held ones time out
    options = uvicorn_options(server, header_timeout_s=head_s, limit_concurrency=10)
    with serving(standalone_app(server), **options) as port:
        async def scenario() -> tuple[list[tuple[float, bytes]], int]:
            stuck = []
            for _ in range(50):  # one at a time: the first 9 are held, the rest refused
                stuck.append(asyncio.ensure_future(_until_closed(port, every_s=0.3)))
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.2)
            during = await asyncio.to_thread(_healthz, port)
            return list(await asyncio.gather(*stuck)), during

        closed, during = asyncio.run(scenario())
        refused = [(after, got) for after, got in closed if got.startswith(b"HTTP/1.1 503 ")]
        held = [after for after, got in closed if not got.startswith(b"HTTP/1.1 503 ")]
        assert during == 503
        assert len(held) <= 9 and len(refused) >= 41, (len(held), len(refused))
        assert all(after < 1.0 for after, _ in refused), max(after for after, _ in refused)  # not at the deadline
        assert all(head_s - 0.2 < after < head_s + 1.0 for after in held), held
        assert _healthz(port) == 200  # they timed out: ordinary requests are answered again


def test_a_keep_alive_connection_serves_two_requests_in_a_row(tmp_path):
    server = _server(tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server, header_timeout_s=HEAD_S)) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            replies = []
            for _ in range(2):
                raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
                reply = b""
                while not reply.endswith(b"alive\n"):
                    chunk = raw.recv(4096)
                    assert chunk, f"closed after {reply!r}"
                    reply += chunk
                replies.append(reply)
                time.sleep(HEAD_S * 0.7)  # together longer than the deadline: each wait has its own
            assert all(r.startswith(b"HTTP/1.1 200 ") for r in replies), replies
            raw.settimeout(HEAD_S + 1.0)
            assert raw.recv(1) == b""  # then idle: closed by its next head's deadline


def test_a_websocket_session_outlives_the_head_deadline(tmp_path):
    server = _server(tmp_path)
    with serving(standalone_app(server), **uvicorn_options(server, header_timeout_s=HEAD_S)) as port:
        async def session() -> tuple[int | None, list[bytes]]:
            async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat", max_size=None) as ws:
                assert await asyncio.wait_for(ws.recv(), 10) == bytes([P.HANDSHAKE])
                await asyncio.sleep(HEAD_S + 0.5)  # past the deadline: not a head any more
                await ws.send(P.message(P.PCM, P.pcm_to_bytes(np.zeros(4800, np.float32))))
                await ws.send(P.notice(N.End()))
                seen = []
                try:
                    while True:
                        seen.append(await asyncio.wait_for(ws.recv(), 20))
                except websockets.ConnectionClosed:
                    pass
                return ws.close_code, seen

        code, seen = asyncio.run(session())
    assert code == P.CLOSE_NORMAL
    assert any(m[:1] == bytes([P.EVENT]) and b'"saved"' in m for m in seen if isinstance(m, bytes))


def test_the_connection_limit_leaves_a_quarter_of_the_open_files_and_room_for_the_sessions():
    assert connection_limit(2, fd_limit=1_048_576) == 256
    assert connection_limit(1000, fd_limit=1_048_576) == 1064
    assert connection_limit(2, fd_limit=160) == 40
    assert connection_limit(2, fd_limit=1024) == 256
    assert connection_limit(2, fd_limit=12) == 8
    assert connection_limit(None, fd_limit=None) >= 8
    with pytest.raises(ValueError):
        uvicorn_options(ChatServer(lambda: None), header_timeout_s=0)
