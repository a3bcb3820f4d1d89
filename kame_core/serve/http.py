"""How uvicorn runs the protocol's servers (``python -m kame_core.serve`` and the studio app): an h11 HTTP
protocol with a deadline on each request's head, and a bound on the connections held at once.

Why: uvicorn's only timer before a request is its keep-alive one, and the first byte received cancels it. A client
that sent a request line and then nothing more (or one header byte a second) held its connection -- and a file
descriptor -- for ever; enough of them and the server could no longer accept anyone (``/healthz`` unanswered).
Here the whole request head must arrive within ``header_timeout_s`` of the moment the server starts waiting for
it (the connection's start, or the end of the previous response on a keep-alive connection): a deadline that
bytes trickling in do not move. Bodies and websockets are not under it (they have their own limits).

uvicorn's ``limit_concurrency`` only answers 503 once a request arrives, so a connection that never sends one
would still hold its descriptor until the deadline; :func:`http_protocol` refuses a connection past the limit the
moment it is made (a 503, then close; past twice the limit a plain close), so the descriptors held stay bounded
whatever the clients do (:func:`connection_limit` says how many).

Both entry points (``demo.app.server.serve``, ``kame_core.serve.__main__``) pass :func:`uvicorn_options`, which names
this class: uvicorn's default (``http="auto"``) would be httptools where that is installed, without the deadline.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .protocol import Limits

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "SessionLimits", "connection_limit", "http_protocol", "open_file_limit",
           "uvicorn_options"]

log = logging.getLogger("kame.serve")

#: the seconds a client has to send a complete request head (docs/protocol.md promises 5 s)
DEFAULT_HEADER_TIMEOUT_S = 5.0
#: connections held at once by default: a studio's browsers keep ~6 each (and Gradio's event streams), far fewer
#: than this; a live session holds one (its websocket)
BASE_CONNECTIONS = 256
#: connections above the session limit kept for pages, health checks and metrics scrapes while sessions run
SESSION_HEADROOM = 64
#: the fewest connections a limit derived from a small open-file limit allows
MIN_CONNECTIONS = 8
#: how long a connection answered before its request was read (408, 503) is kept reading after the answer, so that
#: the client's unread bytes do not turn the close into a reset that destroys the answer before it is read
LINGER_S = 1.0

_TIMEOUT_BODY = b"request head not received in time\n"


class SessionLimits(Protocol):
    """What uvicorn's options are derived from: a server's session limit (None: none) and the protocol's limits
    (:class:`~.server.ChatServer`, or the replicas behind one door, :class:`~.replicas.ReplicatedChat`)."""

    @property
    def max_sessions(self) -> int | None: ...

    @property
    def limits(self) -> Limits: ...
_BUSY_BODY = b"server busy: too many connections; try again later\n"


def connection_limit(max_sessions: int | None, fd_limit: int | None = None) -> int:
    """The connections a server may hold at once: :data:`BASE_CONNECTIONS`, or the session limit plus
    :data:`SESSION_HEADROOM` if more, but never above a quarter of the process's open-file limit (``fd_limit``; by
    default the soft ``RLIMIT_NOFILE``, first raised as far as the hard limit allows towards four descriptors per
    connection wanted: a soft limit of 1024, common, would give 256 and leave a door in front of 8 replicas of 32
    sessions no room for its health checks). Sockets take three quarters at most: the
    connections held, as many being refused (:func:`http_protocol`) and as many accepted in one burst (the listen
    backlog of :func:`uvicorn_options`); the last quarter is for the models, the sessions' files, logs and pipes --
    stuck clients can never stop the server accepting or saving."""
    wanted = max(BASE_CONNECTIONS, (max_sessions or 0) + SESSION_HEADROOM)
    if fd_limit is None:
        fd_limit = open_file_limit(at_least=4 * wanted)
    if fd_limit is None or fd_limit <= 0:
        return wanted
    return max(MIN_CONNECTIONS, min(wanted, fd_limit // 4))


def open_file_limit(at_least: int = 0) -> int | None:
    """The soft open-file limit of this process (None where unknown or unlimited), raised first to ``at_least``
    where it is lower, as far as the hard limit allows (a limit that cannot be raised is left as it is)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < at_least:
        raised = at_least if hard == resource.RLIM_INFINITY else min(at_least, hard)
        if raised > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
                log.info("open-file limit raised from %d to %d for the connections wanted", soft, raised)
                soft = raised
            except (ValueError, OSError) as err:
                log.warning("open-file limit %d could not be raised to %d: %s", soft, raised, err)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def http_protocol(header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S) -> type:
    """uvicorn's h11 HTTP protocol with (see the module docstring) a deadline of ``header_timeout_s`` on each
    request head -- past it the connection is closed, after a 408 if part of a head came -- and a connection past
    uvicorn's ``limit_concurrency`` refused at once with a 503. uvicorn's keep-alive timer is also armed when a
    connection is made (uvicorn arms it only after a response), so one that sends nothing at all is closed after
    ``timeout_keep_alive`` if that is sooner. Pass it as ``uvicorn.run(..., http=...)``."""
    if not header_timeout_s > 0:  # NaN fails too
        raise ValueError(f"header_timeout_s {header_timeout_s}: a number of seconds above 0")
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineH11(H11Protocol):
        """h11 with a deadline on every request head and a bound on the connections (see :func:`http_protocol`)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.head_deadline: asyncio.TimerHandle | None = None
            self.linger: asyncio.TimerHandle | None = None  # set once answered early: what comes is dropped

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # uvicorn's own test for a 503 (this connection counted), made before anything is read
            if self.limit_concurrency is not None and len(self.connections) >= self.limit_concurrency:
                log.warning("refused a connection: %d connections open, the limit", len(self.connections))
                self._answer(503, b"Service Unavailable", _BUSY_BODY)
                return
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)
            self._follow_head()

        def data_received(self, data: bytes) -> None:
            if self.linger is not None:
                return
            super().data_received(data)
            self._follow_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow_head()  # a keep-alive connection waits for its next head from now

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._stop_deadline()
            super().handle_websocket_upgrade(event)

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_deadline()
            if self.linger is not None:
                self.linger.cancel()
            super().connection_lost(exc)

        def _waiting_for_head(self) -> bool:
            return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

        def _follow_head(self) -> None:
            """Arm the deadline when a wait for a head begins (never re-arm it while one lasts); drop it once
            h11 has the head."""
            if not self._waiting_for_head():
                self._stop_deadline()
            elif self.head_deadline is None:
                self.head_deadline = self.loop.call_later(header_timeout_s, self._head_late)

        def _stop_deadline(self) -> None:
            if self.head_deadline is not None:
                self.head_deadline.cancel()
                self.head_deadline = None

        def _head_late(self) -> None:
            self.head_deadline = None
            if not self._waiting_for_head():
                return
            if self.conn.trailing_data[0] and self.conn.our_state is h11.IDLE:  # part of a head came
                log.info("closed a connection whose request head took over %.1f s", header_timeout_s)
                self._answer(408, b"Request Timeout", _TIMEOUT_BODY)
            else:  # nothing came: a plain close, as uvicorn's keep-alive timeout does (a browser's spare socket)
                self.conn.send(h11.ConnectionClosed())
                self.transport.close()

        def _answer(self, status: int, reason: bytes, body: bytes) -> None:
            """Send a whole response before a request was read, then close: once the client closes or after
            :data:`LINGER_S`, reading and dropping meanwhile -- or at once past twice the connection limit."""
            headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                       (b"connection", b"close"), *self.server_state.default_headers]
            for event in (h11.Response(status_code=status, headers=headers, reason=reason), h11.Data(data=body),
                          h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
            crowded = self.limit_concurrency is not None and len(self.connections) >= 2 * self.limit_concurrency
            if crowded or not self.transport.can_write_eof():
                self.transport.close()
                return
            self._unset_keepalive_if_required()
            self.transport.write_eof()  # the answer, then our FIN; the client's EOF closes the transport
            self.linger = self.loop.call_later(LINGER_S, self.transport.close)

    return HeadDeadlineH11


def uvicorn_options(server: SessionLimits, *, header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
                    limit_concurrency: int | None = None) -> dict[str, Any]:
    """How uvicorn must run a server of the protocol: the HTTP protocol of :func:`http_protocol` (a deadline of
    ``header_timeout_s`` on request heads); ``limit_concurrency`` connections at once (default
    :func:`connection_limit` of the server's session limit; past it a 503), and as many waiting to be accepted;
    and the WebSocket library's message limit set to the protocol's (``Limits.max_message_bytes``), so a bigger
    message is refused with 1009 from its frame header, before its payload is buffered (uvicorn's default: 16 MiB).
    No per-message deflate (uvicorn accepts it by default): the protocol's audio is Opus or PCM, which does not
    compress, and deflating every message was half of a door's CPU per session."""
    limit = limit_concurrency if limit_concurrency is not None else connection_limit(server.max_sessions)
    # the listen backlog too: asyncio accepts up to a backlog's worth in one burst before any connection_made can
    # refuse one, so held + accepted at once stay under twice the limit (see connection_limit)
    return {"http": http_protocol(header_timeout_s), "limit_concurrency": limit, "backlog": limit,
            "ws_max_size": server.limits.max_message_bytes, "ws_per_message_deflate": False}
