"""The one door in front of the replicas (``python -m kame_core.serve --replicas N``): ``/api/chat``,
``/healthz``, ``/readyz`` and ``/metrics`` at ``--port``, as a single server has them.

A client is admitted as a single server admits it (:class:`~kame_core.access.Access`: Host, Origin, token or
ticket), then given to the replica with the most free slots, asked at that moment, less the sessions the ingress
sent it that it does not count yet; the slot is reserved at once, so two clients at once never both take a last
slot through this door. The claim itself is made at the replica, which admits atomically (its own session limit
and pool): the ingress opens a websocket to it (with the replicas' own token) and waits for its first message. A
replica that refuses (1013 before its handshake: another door, or a stale view, took the slot) or cannot be
reached is left out and the next is tried, so several doors in front of the same replicas never admit past a
replica's limit, and a client is refused only when none has room. When every replica is full (or unreachable) the
client is closed with 1013 and a reason naming them. Otherwise the ingress pumps messages both ways unchanged: the
replica's ``session`` notice says ``"replica": K`` itself, and a close of the replica (``saved``, 1000, 1008, 1013
once the session ran, ...) reaches the client as it was sent. A replica whose connection breaks without a close (its
process died) closes the client with 1011 and a reason saying so; Ray Serve restarts that replica, which recovers
the session from its journal.

With :class:`Scaling` the door also adds a replica when free slots run short and removes the newest when it has
long been idle (:mod:`.scaling`).

``/readyz`` is 200 while some replica can take a session (its body lists every replica); ``/metrics`` is the
ingress's own counts followed by every replica's metrics, each sample labelled ``replica="K"``.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlencode

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ..access import Access
from ..tickets import TicketBook
from . import protocol as P
from .lifecycle import DRAIN_TIMEOUT_S
from .metrics import CONTENT_TYPE_LATEST
from .scaling import Autoscaler, Grow, ReplicaLoad, ScalingRule, Shrink
from .server import ROUTE, metrics_refusal

__all__ = ["Ingress", "ReplicaLink", "Scaling", "ingress_app", "merge_metrics"]

log = logging.getLogger("kame.serve.ingress")

#: close codes that say no close frame came (the connection broke), never sent by a replica
_ABNORMAL = (1005, 1006, 1015)
#: query parameters of the client the replica is not sent (the ingress checked them; replicas have their own token)
_PRIVATE_QUERY = ("token", "ticket")
#: why a replica did not take a session it was sent: it refused the claim (1013 before its handshake: no slot there
#: after all) or could not be reached
ClaimRefused = Literal["full", "unreachable"]


class ReplicaLink(Protocol):
    """The ingress's line to one replica (:class:`kame_core.serve.replicas.ServeLink` on Ray Serve)."""

    index: int

    async def status(self) -> dict[str, Any]: ...

    async def metrics(self) -> str: ...

    async def stop(self) -> bool: ...


@dataclass(frozen=True)
class Scaling:
    """How the door adds and removes replicas: the rule (:mod:`.scaling`), how often it looks, and the two
    actions (``grow()`` -> the new replica's link once it listens; ``shrink(index)`` removes the newest)."""

    rule: ScalingRule
    grow: Callable[[], Awaitable[ReplicaLink]]
    shrink: Callable[[int], Awaitable[object]]
    period_s: float = 2.0


@dataclass
class _Seen:
    """One replica as the ingress sees it at one moment: its status, or why it could not be asked."""

    index: int
    status: dict[str, Any] | None
    problem: str = ""

    def free(self, routed: int) -> float:
        """Slots free for a new session: the replica's own count less the sessions sent to it that it does not
        count yet (0 when it is not ready or did not answer; ``inf`` without a limit)."""
        if self.status is None or not self.status.get("ready"):
            return 0.0
        free = self.status.get("free_slots")
        if free is None:
            return float("inf")
        return max(0.0, float(free) - max(0, routed - int(self.status.get("active", 0))))

    def answered(self, refused: ClaimRefused) -> _Seen:
        """This replica as its answer to a claim showed it, whatever its status said."""
        if refused == "unreachable":
            return _Seen(self.index, None, "did not answer")
        return _Seen(self.index, {**(self.status or {}), "ready": False, "why": "no free session slot"})

    def words(self) -> str:
        if self.status is None:
            return f"{self.index} unreachable"
        why = str(self.status.get("why", ""))
        return f"{self.index} full" if not why or "slot" in why else f"{self.index} not ready"


@dataclass
class Ingress:
    """The door (see the module docstring). ``links`` are the replicas; ``token`` the one they require;
    ``access`` who may connect here; ``limits`` the protocol's (the message size the door accepts)."""

    links: list[ReplicaLink]
    token: str = field(repr=False)
    access: Access = field(default_factory=Access)
    limits: P.Limits = field(default_factory=P.Limits)
    #: one-use tickets admitted in place of the token (:mod:`kame_core.tickets`)
    tickets: TicketBook = field(default_factory=TicketBook)
    #: how long a replica has to answer a status or metrics call
    ask_timeout_s: float = 3.0
    #: adding and removing replicas as sessions come and go (None: a fixed number)
    scaling: Scaling | None = None
    #: whether the replicas are this door's: a door that joined another's (``serve --door-only``) never stops them
    owns_replicas: bool = True
    #: the replicas running now, asked every ``follow_every_s`` (a joined door follows the first door's scaling:
    #: new replicas are sent sessions, removed ones are dropped once no session of this door is on them)
    follow: Callable[[], Awaitable[list[ReplicaLink]]] | None = None
    follow_every_s: float = 5.0

    def __post_init__(self) -> None:
        self.links = list(self.links)
        self._routed = {link.index: 0 for link in self.links}
        self._scaling_task: asyncio.Task[None] | None = None
        self._follow_task: asyncio.Task[None] | None = None
        self.changing: str = ""  # a replica being added or removed, in words
        self._quiet_until: dict[int, float] = {}  # replica -> loop time until which it is not asked
        self.closing = False
        r = self.registry = CollectorRegistry()
        self._active = Gauge("kame_ingress_sessions_active", "sessions the ingress is pumping now", registry=r)
        self._active.set_function(lambda: sum(self._routed.values()))
        self._refused = Counter("kame_ingress_refused", "connections the ingress refused", ["why"], registry=r)
        self._lost = Counter("kame_ingress_replica_lost", "sessions closed because their replica stopped "
                             "answering", ["replica"], registry=r)
        self._up = Gauge("kame_replica_up", "1 when the replica answered the last status or metrics call",
                         ["replica"], registry=r)
        self._count = Gauge("kame_ingress_replicas", "replicas the door sends sessions to", registry=r)
        self._count.set_function(lambda: len(self.links))
        self._scaled = Counter("kame_ingress_scaled", "replicas the door added (up), removed (down) or failed to "
                               "add (failed)", ["direction"], registry=r)

    # ------------------------------------------------------------------------------------------ replicas
    async def _seen(self) -> list[_Seen]:
        """Every replica's status now; one that did not answer is not asked again for ``ask_timeout_s`` (an
        admission meanwhile does not wait for it). Every request asks, so the scaling loop starts here."""
        self.start_scaling()
        loop = asyncio.get_running_loop()

        async def one(link: ReplicaLink) -> _Seen:
            if loop.time() < self._quiet_until.get(link.index, 0.0):
                return _Seen(link.index, None, "did not answer moments ago; asked again shortly")
            try:
                status = await asyncio.wait_for(link.status(), self.ask_timeout_s)
            except Exception as err:  # noqa: BLE001 - dead, restarting or slow: not chosen, said so
                self._up.labels(str(link.index)).set(0)
                self._quiet_until[link.index] = loop.time() + self.ask_timeout_s
                return _Seen(link.index, None, f"did not answer ({type(err).__name__})")
            self._up.labels(str(link.index)).set(1)
            return _Seen(link.index, status)

        return list(await asyncio.gather(*(one(link) for link in self.links)))

    async def _reserve(self, tried: dict[int, ClaimRefused] | None = None) -> tuple[int, str] | str:
        """(replica, its address) with a slot now reserved for the caller, or why none (the 1013 reason); the
        replicas in ``tried`` (they refused this client's claim, or could not be reached) are not chosen. The
        choice and the reservation happen with no await between them, against the sessions already sent to each
        replica (:meth:`_Seen.free`): two clients at once never take the same last slot, and a replica slow to
        answer delays no other admission."""
        tried = tried or {}
        seen = [s.answered(tried[s.index]) if s.index in tried else s
                for s in await self._seen() if s.index in self._routed]  # not one retired meanwhile
        best = max(seen, key=lambda s: (s.free(self._routed[s.index]), -self._routed[s.index], -s.index))
        if best.status is None or best.free(self._routed[best.index]) <= 0:
            return _busy(seen)
        self._routed[best.index] += 1
        return best.index, str(best.status["address"])

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(some replica can take a session now, what ``/readyz`` says: the totals and every replica)."""
        seen = [s for s in await self._seen() if s.index in self._routed]
        rows: list[dict[str, Any]] = []
        for s in seen:
            if s.status is None:
                rows.append({"replica": s.index, "ready": False, "why": s.problem})
                continue
            row = {k: s.status[k] for k in ("ready", "free_slots", "active", "why") if k in s.status}
            rows.append({"replica": s.index, **row, "sessions_here": self._routed[s.index]})
        free = [s.free(self._routed[s.index]) for s in seen]
        ready = not self.closing and any(f > 0 for f in free)
        total = None if any(f == float("inf") for f in free) else int(sum(free))
        body: dict[str, Any] = {"ready": ready, "free_slots": total, "active": sum(self._routed.values()),
                                "replicas": rows}
        if self.scaling is not None:
            rule = self.scaling.rule
            body["scaling"] = {"min_replicas": rule.min_replicas, "max_replicas": rule.max_replicas,
                               "keeps_free": rule.wanted_free, "changing": self.changing}
        if not ready:
            body["why"] = "the server is shutting down" if self.closing else "no replica has a free session slot"
        return ready, body

    async def metrics_text(self) -> bytes:
        """The ingress's metrics, then every replica's labelled with its index (one that does not answer is
        ``kame_replica_up{replica="K"} 0``)."""
        self.start_scaling()  # a scrape asks no status (_seen): start the loop here too

        async def one(link: ReplicaLink) -> tuple[int, str | None]:
            try:
                text = await asyncio.wait_for(link.metrics(), self.ask_timeout_s)
            except Exception:  # noqa: BLE001 - reported as down
                self._up.labels(str(link.index)).set(0)
                return link.index, None
            self._up.labels(str(link.index)).set(1)
            return link.index, text

        texts = await asyncio.gather(*(one(link) for link in self.links))
        return generate_latest(self.registry) + merge_metrics({k: t for k, t in texts if t is not None})

    # ------------------------------------------------------------------------------------------ sessions
    async def handle(self, websocket: Any) -> None:
        """One client's websocket, from accept to close (Starlette ``WebSocket``)."""
        refused = self.access.refusal(websocket.headers, websocket.query_params, self.tickets)
        await websocket.accept()
        if refused is not None:
            log.warning("refused a connection: %s", refused)
            self._refused.labels("access").inc()
            await websocket.close(code=P.CLOSE_POLICY, reason=refused[:120])
            return
        if self.closing:
            self._refused.labels("shutting down").inc()
            await websocket.close(code=P.CLOSE_GOING_AWAY, reason="server shutting down")
            return
        tried: dict[int, ClaimRefused] = {}  # replicas that refused this client's claim or could not be reached
        while True:
            chosen = await self._reserve(tried)
            if isinstance(chosen, str):
                log.warning("refused a session: %s", chosen)
                self._refused.labels("every replica full").inc()
                await websocket.close(code=P.CLOSE_TRY_LATER, reason=_reason(chosen))
                return
            index, address = chosen
            try:
                refusal = await self._pump(websocket, index, address)
            finally:
                self._routed[index] -= 1
            if refusal is None:
                return
            tried[index] = refusal

    async def _pump(self, client: Any, index: int, address: str) -> ClaimRefused | None:
        """Claim a session at replica ``index`` and pump it until it ends; why the claim failed when the replica
        refused it (1013 before its first message) or could not be reached (the client is still open then)."""
        import websockets

        query = urlencode([(k, v) for k, v in client.query_params.multi_items() if k not in _PRIVATE_QUERY])
        url = f"ws://{address}{ROUTE}" + (f"?{query}" if query else "")
        try:
            upstream = await websockets.connect(url, additional_headers={"X-KAME-Token": self.token},
                                                max_size=None, open_timeout=10, compression=None)  # Opus: no deflate
        except (OSError, asyncio.TimeoutError, websockets.WebSocketException) as err:
            log.error("replica %d at %s could not be reached: %s", index, address, err)
            self._refused.labels("replica unreachable").inc()
            return "unreachable"
        async with upstream:
            try:
                first = await upstream.recv()
            except websockets.ConnectionClosed:  # it closed before its handshake
                if upstream.close_code == P.CLOSE_TRY_LATER:  # no slot there after all: the next replica is tried
                    log.info("replica %d refused a session: %s", index, upstream.close_reason)
                    self._refused.labels("replica full").inc()
                    return "full"
                await self._pass_close(client, upstream, index)
                return None
            try:
                await (client.send_bytes(first) if isinstance(first, bytes) else client.send_text(first))
            except Exception:  # noqa: BLE001 - the client left while the replica got ready: it ends the session
                return None
            to_replica = asyncio.ensure_future(_client_to_replica(client, upstream))
            to_client = asyncio.ensure_future(_replica_to_client(upstream, client))
            done, _ = await asyncio.wait({to_replica, to_client}, return_when=asyncio.FIRST_COMPLETED)
            if to_replica in done and to_replica.result():  # the client left: the replica ends the session
                to_client.cancel()
                with contextlib.suppress(Exception):
                    await upstream.close()
                return None
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(to_client), 10)
            to_replica.cancel()
            to_client.cancel()
        await self._pass_close(client, upstream, index)
        return None

    async def _pass_close(self, client: Any, upstream: Any, index: int) -> None:
        """Close ``client`` as replica ``index`` closed (1011 when its connection broke without a close)."""
        code, reason = upstream.close_code, upstream.close_reason or ""  # the replica's close, passed on
        if code is None or code in _ABNORMAL:
            log.error("replica %d's connection broke mid-session (its process died?)", index)
            self._lost.labels(str(index)).inc()
            code, reason = P.CLOSE_INTERNAL, (f"replica {index} stopped mid-session; the session is recovered "
                                              "from its journal when the replica restarts")
        with contextlib.suppress(Exception):
            await client.close(code=code, reason=_reason(reason))

    # ------------------------------------------------------------------------------------------ scaling
    async def loads(self) -> list[ReplicaLoad]:
        """Every replica's load now, as the door counts it (sessions it sent that a replica does not count yet
        included)."""
        loads = []
        for s in await self._seen():
            routed = self._routed.get(s.index)
            if routed is None:  # retired meanwhile
                continue
            status = s.status or {}
            loads.append(ReplicaLoad(s.index, bool(status.get("ready")), s.free(routed),
                                     max(routed, int(status.get("active", 0)))))
        return loads

    def add(self, link: ReplicaLink) -> None:
        """Send sessions to ``link``'s replica too."""
        self.links.append(link)
        self._routed[link.index] = 0

    def retire(self, index: int) -> ReplicaLink | None:
        """Send no more sessions to replica ``index``: its link, or None while it has a session through the door
        (then nothing changes)."""
        if self._routed.get(index, 1):
            return None
        del self._routed[index]
        link = next(link for link in self.links if link.index == index)
        self.links.remove(link)
        return link

    def start_scaling(self) -> None:
        """Start the scaling loop on this loop, once (the app's start-up calls it, and so does every request:
        a door mounted on an app it did not make has no start-up of its own)."""
        if self.scaling is not None and self._scaling_task is None and not self.closing:
            self._scaling_task = asyncio.get_running_loop().create_task(self._scale())
        if self.follow is not None and self._follow_task is None and not self.closing:
            self._follow_task = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        """Until the door closes: every ``follow_every_s`` take the replicas running now (:attr:`follow`): send
        sessions to new ones too, and stop sending them to those gone (dropped once no session of this door is on
        them; a failed look changes nothing)."""
        assert self.follow is not None
        while not self.closing:
            await asyncio.sleep(self.follow_every_s)
            try:
                running = {link.index: link for link in await self.follow()}
            except Exception:  # noqa: BLE001 - the door goes on with the replicas it knows
                log.exception("the running replicas could not be listed")
                continue
            for index, link in running.items():
                if index not in self._routed:
                    log.warning("replica %d joined: sessions go to it too", index)
                    self.add(link)
            for index in [i for i in self._routed if i not in running]:
                if self.retire(index) is not None:
                    log.warning("replica %d is gone: no more sessions go to it", index)

    async def _scale(self) -> None:
        """Until the door closes: every ``period_s`` ask the replicas, let the rule decide, do what it says (one
        change at a time; a new replica joins once it listens, the newest leaves once it has no session)."""
        assert self.scaling is not None
        scaling, loop = self.scaling, asyncio.get_running_loop()
        autoscaler = Autoscaler(scaling.rule)
        while not self.closing:
            await asyncio.sleep(scaling.period_s)
            if self.closing:
                return
            decision: Grow | Shrink | None = None
            try:
                decision = autoscaler.decide(loop.time(), await self.loads())
                if isinstance(decision, Grow):
                    await self._grow(decision, scaling)
                elif isinstance(decision, Shrink):
                    await self._shrink(decision, scaling)
            except Exception:  # noqa: BLE001 - the door goes on serving with the replicas it has
                log.exception("the scaling loop failed a round")
            if decision is not None:
                autoscaler.forget()
            self.changing = ""

    async def _grow(self, decision: Grow, scaling: Scaling) -> None:
        log.warning("adding replica %d: %s", decision.index, decision.why)
        self.changing = f"adding replica {decision.index} ({decision.why})"
        try:
            link = await scaling.grow()
        except Exception as err:  # noqa: BLE001 - said, counted; the rule may ask again
            log.error("replica %d could not be added: %s", decision.index, err)
            self._scaled.labels("failed").inc()
            return
        if self.closing:
            return
        self.add(link)
        self._scaled.labels("up").inc()

    async def _shrink(self, decision: Shrink, scaling: Scaling) -> None:
        link = self.retire(decision.index)
        if link is None:  # a session arrived since the rule looked
            return
        log.warning("removing replica %d: %s", decision.index, decision.why)
        self.changing = f"removing replica {decision.index} ({decision.why})"
        try:
            await scaling.shrink(decision.index)
        except Exception as err:  # noqa: BLE001 - it still runs: keep using it
            log.error("replica %d could not be removed: %s", decision.index, err)
            self.add(link)
            return
        self._scaled.labels("down").inc()

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """Shut down: no new session; every replica ends its sessions as a shutdown does (saved, 1001, which
        reach the clients) and stops -- unless the replicas are another door's (:attr:`owns_replicas`): then they
        go on, and this door's sessions end as its connections close (each replica saves them). Whether every
        session through this door ended within ``timeout_s``."""
        self.closing = True
        for task in (self._scaling_task, self._follow_task):
            if task is not None:
                task.cancel()
        if self.owns_replicas:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*(link.stop() for link in self.links), return_exceptions=True),
                                       timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while sum(self._routed.values()) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return not sum(self._routed.values())

    # ------------------------------------------------------------------------------------------ HTTP
    def mount(self, app: Any) -> None:
        """Add ``/api/chat``, ``/healthz``, ``/readyz`` and ``/metrics`` to a FastAPI / Starlette ``app``."""
        from starlette.responses import JSONResponse, PlainTextResponse, Response

        async def healthz(request: Any) -> Any:
            return PlainTextResponse("alive\n")

        async def readyz(request: Any) -> Any:
            ready, body = await self.readiness()
            return JSONResponse(body, status_code=200 if ready else 503)

        async def metrics(request: Any) -> Any:
            refused = metrics_refusal(self.access, request.headers)
            if refused is not None:
                return refused
            return Response(await self.metrics_text(), media_type=CONTENT_TYPE_LATEST)

        app.router.add_websocket_route(ROUTE, self.handle)
        app.router.add_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
        app.router.add_route("/readyz", readyz, methods=["GET"], include_in_schema=False)
        app.router.add_route("/metrics", metrics, methods=["GET"], include_in_schema=False)


async def _client_to_replica(client: Any, upstream: Any) -> bool:
    """Forward the client's messages; True when the client left, False when the replica's side closed."""
    import websockets

    while True:
        try:
            message = await client.receive()
        except Exception:  # noqa: BLE001 - the client's connection is gone
            return True
        if message["type"] == "websocket.disconnect":
            return True
        data = message.get("bytes")
        try:
            await upstream.send(data if data is not None else message.get("text") or "")
        except websockets.ConnectionClosed:
            return False


async def _replica_to_client(upstream: Any, client: Any) -> None:
    """Forward the replica's messages until its side closes (however it closes)."""
    import websockets

    try:
        async for data in upstream:
            if isinstance(data, bytes):
                await client.send_bytes(data)
            else:
                await client.send_text(data)
    except websockets.ConnectionClosed:
        pass


def _busy(seen: list[_Seen]) -> str:
    """The 1013 reason when no replica can take a session: each replica's state, or their counts when many."""
    tail = "; try again when a session ends"
    reason = f"server busy: every replica is full or down ({', '.join(s.words() for s in seen)})" + tail
    if len(reason) <= 120:
        return reason
    words = [s.words().split(" ", 1)[1] for s in seen]
    counts = ", ".join(f"{words.count(w)} {w}" for w in dict.fromkeys(words))
    return f"server busy: every replica is full or down ({counts} of {len(seen)})" + tail


def _reason(text: str) -> str:
    """A close reason within the protocol's 123 bytes (UTF-8), cut at 120."""
    return text.encode("utf-8")[:120].decode("utf-8", "ignore")


def merge_metrics(texts: dict[int, str]) -> bytes:
    """Prometheus texts of replicas as one exposition: each family once, its samples from every replica with a
    ``replica`` label added."""
    families: dict[str, Metric] = {}
    for index, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            for sample in family.samples:
                merged.add_sample(sample.name, {**sample.labels, "replica": str(index)}, sample.value,
                                  sample.timestamp, sample.exemplar)

    class _Fixed:
        def collect(self) -> list[Metric]:
            return list(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed())  # type: ignore[arg-type]
    return generate_latest(registry)


def ingress_app(ingress: Ingress) -> Any:
    """A FastAPI app serving the ingress's routes (its scaling loop, if any, starts with the app)."""
    from fastapi import FastAPI

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        ingress.start_scaling()
        yield

    app = FastAPI(title="KAME live protocol (replicas)", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    ingress.mount(app)
    return app
