"""A tiny HTTP/1.1 server on 127.0.0.1 (random free port, own thread) for streaming-protocol fakes.

A provider fake is a function ``script(request, reply)``: it reads the recorded request and writes a response
through :class:`Reply` -- a JSON body, or server-sent events in chunked transfer encoding, or an abrupt
disconnect. When the client goes away mid-stream the next write fails; the server records that in
``FakeServer.disconnected`` so a test can see that cancellation really closed the connection.
"""
from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ClientGone(Exception):
    """The client closed the connection while the fake was still writing."""


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Reply:
    """Response writer handed to a script."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._h = handler
        self._chunked = False

    def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self._h.send_response(status)
        all_headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
        for k, v in all_headers.items():
            self._h.send_header(k, v)
        self._h.end_headers()
        self._write(data)

    def start_events(self) -> None:
        self._h.send_response(200)
        self._h.send_header("Content-Type", "text/event-stream")
        self._h.send_header("Cache-Control", "no-cache")
        self._h.send_header("Transfer-Encoding", "chunked")
        self._h.end_headers()
        self._chunked = True

    def event(self, data: Any, event: str | None = None) -> None:
        """One SSE event; ``data`` that is not a string is JSON-encoded."""
        payload = data if isinstance(data, str) else json.dumps(data)
        text = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
        self._chunk(text.encode())

    def end(self) -> None:
        self._write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the socket abruptly (no terminating chunk): a connection lost mid-stream."""
        self._h.close_connection = True
        try:
            self._h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _chunk(self, data: bytes) -> None:
        self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _write(self, data: bytes) -> None:
        try:
            self._h.wfile.write(data)
            self._h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            raise ClientGone() from exc


Script = Callable[[RecordedRequest, Reply], None]


class FakeServer:
    """Serve ``script`` on ``http://127.0.0.1:<port>``; use as a context manager."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[RecordedRequest] = []
        self.disconnected = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="fake-provider")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str), host  # an AF_INET server: a str host
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode(errors="replace")
                request = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                server.requests.append(request)
                try:
                    server.script(request, Reply(self))
                except ClientGone:
                    server.disconnected.set()
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                pass

        return Handler
