"""The live protocol's server: ``/api/chat`` on a FastAPI / Starlette app, one :class:`~.session.ChatSession`
per websocket, admitted by the server's session limit and the pool's slots (two
:class:`~kame_core.session.SessionGate` s).

:class:`ChatServer` holds what sessions share read-only (the stack, built once on first use, the sessions
folder, the limits) and the admission gate; :meth:`ChatServer.mount` adds the route to an app (the studio's
own app in :func:`demo.app.server.create_app`, or the standalone one of :func:`standalone_app`). Past the limit a
client is accepted and closed at once with code 1013 ("try again later") and a reason -- never left hanging.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..access import Access
from ..session import SessionGate, SessionStore
from ..session.disk import FolderInUse, FolderLock, RecordingCheck, error_words
from ..session.heap import trim_free_heap
from ..session.saving import RetryingSaves
from ..stacks.served import ServedStack
from ..tickets import TicketBook
from . import protocol as P
from .http import http_protocol as http_protocol  # re-exported: the HTTP side lives in .http
from .http import uvicorn_options as uvicorn_options
from .metrics import CONTENT_TYPE_LATEST, ServerMetrics
from .session import ChatSession, SessionEnd, default_sessions_dir

log = logging.getLogger("kame.serve")

ROUTE = "/api/chat"


@dataclass
class ChatServer:
    """Serves the protocol (see the module docstring). ``load_stack`` is called once, on the first session
    (off the event loop: models load for seconds); ``max_sessions`` None means no limit."""

    load_stack: Callable[[], ServedStack]
    max_sessions: int | None = 2
    sessions_dir: Path = field(default_factory=default_sessions_dir)
    limits: P.Limits = field(default_factory=P.Limits)
    head_start_s: float = 0.16
    #: who may connect (cross-site pages never; a token when set)
    access: Access = field(default_factory=Access)
    #: one-use tickets of the app's Talk page, admitted in place of the token (:mod:`kame_core.tickets`)
    tickets: TicketBook = field(default_factory=TicketBook)
    #: how each session ended, newest last (for tests and logs; bounded)
    results: list[SessionEnd] = field(default_factory=list)
    #: the journal's flush interval of each session (seconds)
    journal_every_s: float = 1.0
    #: which replica this server is behind ``serve --replicas`` (None: a server on its own)
    replica: int | None = None

    def __post_init__(self) -> None:
        self._limit = SessionGate(capacity=self.max_sessions,
                                  reason=f"{self.max_sessions} live session(s) running, the server's limit")
        self._stack: ServedStack | None = None
        self._stack_lock = asyncio.Lock()
        self.metrics = ServerMetrics()
        self.metrics.active.set_function(lambda: self._limit.active)
        self.folder_lock = FolderLock(Path(self.sessions_dir))
        #: saves that failed at a session's end and are retried in the background
        self.retries = RetryingSaves()
        self._recording = RecordingCheck(Path(self.sessions_dir))
        self._sessions: set[ChatSession] = set()
        #: set by :meth:`drain`: no new session starts
        self.closing = False

    def open_folder(self) -> str | None:
        """Take the sessions folder (one server per folder: :class:`FolderInUse` when another process holds it),
        check that it can be written, and save what a crash left in its journal. None when sessions can be
        recorded, else why not (in a client's words; nothing is recovered then)."""
        problem = self._recording.check(force=True)
        try:
            self.folder_lock.acquire()
        except OSError as err:  # FolderInUse is not one: it stops the server
            problem = problem or f"the sessions folder cannot be locked: {error_words(err)}"
        if problem is None:
            recovered = SessionStore(Path(self.sessions_dir)).recover(self.limits.max_frames)
            if recovered:
                log.warning("recovered %d session(s) a crash had left unfinished: %s", len(recovered),
                            ", ".join(p.name for p in recovered))
        else:
            log.error("sessions cannot be recorded in %s: %s", self.sessions_dir, problem)
        return problem

    def recording_problem(self) -> str | None:
        """Why sessions cannot be recorded now (the folder is probed at most every couple of seconds), or None."""
        problem = self._recording.check()
        if problem is None and not self.folder_lock.held:  # it could not be taken at the start
            try:
                self.folder_lock.acquire()
            except (OSError, FolderInUse) as err:
                return f"the sessions folder cannot be locked: {error_words(err)}"
        return problem

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(a session can start now, what ``/readyz`` says): models loaded, sessions can be recorded, the oracle
        worker answers, the server is not shutting down, and a free place in every gate."""
        if self._stack is None:
            return False, {"ready": False, "why": "the models are not loaded yet"}
        if self.closing:
            return False, {"ready": False, "why": "the server is shutting down"}
        problem = self.recording_problem() or self._stack.problem()
        if problem is not None:
            return False, {"ready": False, "why": problem}
        free: list[int] = []
        for gate in (self._stack.gate, self._limit):
            if gate is not None and gate.capacity is not None:
                free.append(max(0, gate.capacity - gate.active))
        slots = min(free) if free else None
        ready = slots is None or slots > 0
        return ready, {"ready": ready, "free_slots": slots, "active": self.active,
                       **({} if ready else {"why": "every session slot is in use"})}

    @property
    def active(self) -> int:
        """Sessions running now."""
        return self._limit.active

    async def stack(self) -> ServedStack:
        """The stack, loaded on first use (if :meth:`preload` did not)."""
        async with self._stack_lock:
            if self._stack is None:
                await asyncio.to_thread(self.preload)
            assert self._stack is not None
            return self._stack

    def preload(self) -> ServedStack:
        """Load (and warm) the stack now, before the server listens: a first client is then answered like any
        other, and ``/readyz`` says ready."""
        if self._stack is None:
            if not self.folder_lock.held:
                self.open_folder()  # what a crash left is saved first
            self._stack = self.load_stack()
            if self._stack.neural is not None:
                for pool in (self._stack.neural.kame, self._stack.neural.moshi):
                    self.metrics.watch_pool(pool)
            if self._stack.stt_worker is not None:
                self.metrics.watch_stt(self._stack.stt_worker)
        return self._stack

    async def handle(self, websocket: Any) -> None:
        """One websocket connection (Starlette ``WebSocket``), from accept to close."""
        refused = self.access.refusal(websocket.headers, websocket.query_params, self.tickets)
        await websocket.accept()
        if refused is not None:
            log.warning("refused a connection: %s", refused)
            self.metrics.refused.labels("access").inc()
            await websocket.close(code=P.CLOSE_POLICY, reason=refused[:120])
            return
        if self.closing:
            self.metrics.refused.labels("shutting down").inc()
            await websocket.close(code=P.CLOSE_GOING_AWAY, reason="server shutting down")
            return
        try:
            stack = await self.stack()
        except FolderInUse:
            log.exception("the sessions folder is held by another server")
            await websocket.close(code=P.CLOSE_INTERNAL, reason="the server cannot record: its sessions folder "
                                                                "is in use by another server")
            return
        except Exception as err:  # noqa: BLE001 - a stack that cannot load is told to the client
            log.exception("the stack could not be loaded")
            await websocket.close(code=P.CLOSE_INTERNAL, reason=f"the stack could not load: "
                                                                f"{type(err).__name__}"[:120])
            return
        problem = await asyncio.to_thread(self.recording_problem)
        if problem is not None:
            log.error("refused a session: %s", problem)
            self.metrics.refused.labels("cannot record").inc()
            await websocket.close(code=P.CLOSE_TRY_LATER, reason=f"server cannot record: {problem}"[:120])
            return
        tickets = []
        try:
            for gate in (g for g in (stack.gate, self._limit) if g is not None):  # the pool's first: it says most
                ticket = gate.try_enter()
                if ticket is None:
                    reason = f"server busy: {gate.reason or 'no free session'}; try again when a session ends"
                    log.warning("refused a session: %s", reason)
                    self.metrics.refused.labels("pool full" if gate is stack.gate else "server limit").inc()
                    await websocket.close(code=P.CLOSE_TRY_LATER, reason=reason[:120])
                    return
                tickets.append(ticket)
            pcm_out = websocket.query_params.get("audio", "opus") == "pcm"
            session = ChatSession(stack.make_runner, self.sessions_dir, self.limits, pcm_out=pcm_out,
                                  head_start_s=self.head_start_s, components=stack.components,
                                  metrics=self.metrics.tap(), claim=websocket.query_params.get("claim", "")[:128],
                                  retries=self.retries, journal_every_s=self.journal_every_s,
                                  replica=self.replica)
            self.metrics.started.inc()
            self._sessions.add(session)
            try:
                result = await session.serve(_StarletteConnection(websocket))
            finally:
                self._sessions.discard(session)
            self.metrics.closed.labels(str(result.close_code) if result.close_code is not None
                                       else "client gone").inc()
            self.results.append(result)
            del self.results[:-50]
        finally:
            for ticket in tickets:
                ticket.release()
            if tickets and self.active == 0 and (stack.gate is None or stack.gate.active == 0):
                await asyncio.to_thread(trim_free_heap)  # the last session (of every door) ended: stalls nobody

    async def drain(self, timeout_s: float = 10.0) -> bool:
        """Shut down gracefully (on the server's event loop): no new session starts, and every running one is
        ended as the server's decision -- stopped, saved, told ``saved``, closed with 1001 "server shutting
        down". Whether they all ended within ``timeout_s``."""
        self.closing = True
        for session in list(self._sessions):
            session.request_stop()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._sessions and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if self._sessions:
            log.error("%d session(s) did not end within %.0f s of the shutdown", len(self._sessions), timeout_s)
        return not self._sessions

    def mount(self, app: Any, path: str = ROUTE) -> None:
        """Add the websocket route and ``GET /healthz`` (alive), ``/readyz`` (200 only when a session can start
        now; JSON with the free slots), ``/metrics`` (Prometheus text) to a FastAPI / Starlette ``app``."""
        from starlette.responses import JSONResponse, PlainTextResponse, Response

        async def healthz(request: Any) -> Any:
            return PlainTextResponse("alive\n")

        async def readyz(request: Any) -> Any:
            ready, body = await asyncio.to_thread(self.readiness)  # it may probe the disk
            return JSONResponse(body, status_code=200 if ready else 503)

        async def metrics(request: Any) -> Any:
            refused = metrics_refusal(self.access, request.headers)
            if refused is not None:
                return refused
            return Response(self.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

        app.router.add_websocket_route(path, self.handle)  # Starlette's route: the handler gets the WebSocket
        app.router.add_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
        app.router.add_route("/readyz", readyz, methods=["GET"], include_in_schema=False)
        app.router.add_route("/metrics", metrics, methods=["GET"], include_in_schema=False)


class _StarletteConnection:
    """A Starlette websocket as a :class:`~.session.Connection`."""

    def __init__(self, websocket: Any) -> None:
        self._ws = websocket
        self._closed = False

    async def receive(self) -> bytes | str | None:
        if self._closed:
            return None
        message = await self._ws.receive()
        if message["type"] == "websocket.disconnect":
            self._closed = True
            return None
        if message.get("bytes") is not None:
            return message["bytes"]
        return message.get("text") or ""

    async def send(self, data: bytes) -> None:
        await self._ws.send_bytes(data)

    async def close(self, code: int, reason: str) -> None:
        if not self._closed:
            self._closed = True
            await self._ws.close(code=code, reason=reason)


def metrics_refusal(access: Access, headers: Any) -> Any:
    """The response refusing ``GET /metrics`` to a client without the metrics token (None: let it in); the
    single server's and the replicas' ingress's."""
    from starlette.responses import PlainTextResponse

    refused = access.metrics_refusal(headers)
    if refused is None:
        return None
    return PlainTextResponse(refused[1] + "\n", status_code=refused[0],
                             headers={"WWW-Authenticate": "Bearer"} if refused[0] == 401 else None)




def standalone_app(server: ChatServer) -> Any:
    """A FastAPI app serving only the protocol (``python -m kame_core.serve``)."""
    from fastapi import FastAPI

    app = FastAPI(title="KAME live protocol", docs_url=None, redoc_url=None, openapi_url=None)
    server.mount(app)
    return app
