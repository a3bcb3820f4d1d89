"""Replicas of the live server on Ray Serve (``python -m kame_core.serve --replicas N``).

Each replica is its own Serve application ``kame-replica-K`` with one deployment replica: a
:class:`~.server.ChatServer` with its own stack (pool, STT, LLM client), its own sessions folder
``<sessions dir>/replica-K`` (so its lock and crash journal are its own) and its own uvicorn, on a free port of its
node, in a thread of the replica's process. It answers small Serve calls (:class:`LiveReplica`: status, metrics,
stop); the clients' websockets reach it through the ingress (:mod:`.ingress`) only, which sends a token made at
start-up (:attr:`ReplicaSpec.token`). One application per replica gives each a stable index K: Serve restarts a
replica whose process died or whose health check fails, and the new process takes the same K, hence the same
folder, and recovers the journals of the sessions the dead one left (as a restarted server does).

Ray is started or joined in one place, :class:`kame_core.executors.ray_executor.RayExecutor`; Ray is imported
inside functions only (the single-server path never imports it). A local Ray, and so its replicas, listen on
loopback only (:func:`~kame_core.executors.ray_executor.keep_local_ray_on_loopback`);
:meth:`ReplicatedChat.exposure` says what listens where when more than the door is open (docs/deploy.md, "What
listens where").
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..access import LOOPBACK_HOSTS, Access, is_loopback
from ..executors.ray_executor import (
    RAY_AUTH_MODE,
    RAY_ONE_MACHINE,
    RayExecutor,
    keep_local_ray_on_loopback,
    ray_auth_mode,
    run_local_ray_workers_at_full_priority,
    token_auth_on,
)
from ..session.store import REPLICA_FOLDER_PREFIX
from ..stacks.served import ServedStack
from ..tickets import TicketBook
from .ingress import Ingress, ReplicaLink, Scaling
from .lifecycle import DRAIN_TIMEOUT_S
from .protocol import Limits
from .scaling import ScalingRule
from .server import ROUTE, ChatServer, standalone_app

__all__ = ["APP_PREFIX", "LiveReplica", "RayReplicas", "ReplicaError", "ReplicaSpec", "ServeLink",
           "replica_dir"]

log = logging.getLogger("kame.serve.replicas")

#: the Serve application of replica K is ``f"{APP_PREFIX}{K}"``
APP_PREFIX = "kame-replica-"
#: how often Serve asks a replica whether its server still runs, and how long it waits for the answer
HEALTH_CHECK_PERIOD_S = 2.0
HEALTH_CHECK_TIMEOUT_S = 30.0
#: the first line of a raised exception in a traceback (``kame_core.x.SomeError: message``): group 1 its class
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Unavailable|InUse|Exit)): ")
#: how long a replica's uvicorn has to start listening once the models are loaded
LISTEN_TIMEOUT_S = 30.0
#: how long a replica the door adds may take to start (on a cluster: a node for it may have to come up first)
GROW_TIMEOUT_S = 900.0


class ReplicaError(RuntimeError):
    """A replica could not start (its folder, its models, its port), or Ray Serve is missing; says why."""


def replica_dir(sessions_dir: Path, index: int) -> Path:
    """Where replica ``index`` saves its sessions and keeps its journal."""
    return Path(sessions_dir) / f"{REPLICA_FOLDER_PREFIX}{index}"


@dataclass(frozen=True)
class ReplicaSpec:
    """What every replica builds (shipped to each replica's process): ``load_stack`` as for a
    :class:`~.server.ChatServer`, the sessions folder the replicas' folders go under, the session limit of each
    replica (None: none), the slots of each replica's neural pool (None: not neural; a replica without a session
    limit still runs no more sessions than its pool has slots), the session limits, and the token the ingress sends
    (made here; never in a repr)."""

    load_stack: Callable[[], ServedStack]
    sessions_dir: Path
    max_sessions: int | None = 2
    pool_size: int | None = None
    limits: Limits = field(default_factory=Limits)
    journal_every_s: float = 1.0
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    #: the most replicas the door that starts them may run (its scaling's maximum, else their count; None: not said)
    most_replicas: int | None = None
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)

    @property
    def sessions_each(self) -> int | None:
        """Sessions one replica runs at once: its session limit, else its pool's slots (None: no limit)."""
        return self.max_sessions if self.max_sessions is not None else self.pool_size

    def capacity(self) -> ReplicaCapacity:
        """What a door joining these replicas must know to size its connections as the first door did."""
        return ReplicaCapacity(self.sessions_each, self.most_replicas)


@dataclass(frozen=True)
class ReplicaCapacity:
    """Sessions each replica runs at once and the most replicas there may be (None: not limited / not said)."""

    sessions_each: int | None
    most_replicas: int | None


class LiveReplica:
    """One replica: the Serve deployment's class (see the module docstring). The constructor loads the models,
    recovers the folder's journals and starts listening; a folder that cannot be recorded in, or is held by
    another process, fails it with :class:`ReplicaError`."""

    def __init__(self, spec: ReplicaSpec, index: int) -> None:
        # Serve calls the constructor on its replica's running event loop: the models (whose warm-up runs a loop
        # of its own) load on a thread of their own
        with ThreadPoolExecutor(1, thread_name_prefix=f"kame-replica-{index}-load") as loader:
            loader.submit(self._start, spec, index).result()

    def _start(self, spec: ReplicaSpec, index: int) -> None:
        import uvicorn

        from .lifecycle import GracefulServer
        from .server import uvicorn_options

        self.index = index
        self._token, self._capacity = spec.token, spec.capacity()
        host = _node_address()
        hosts = LOOPBACK_HOSTS if is_loopback(host) else frozenset({f"[{host}]" if ":" in host else host})
        self.chat = ChatServer(spec.load_stack, max_sessions=spec.max_sessions,
                               sessions_dir=replica_dir(spec.sessions_dir, index), limits=spec.limits,
                               access=Access(token=spec.token, metrics_token=spec.token, allowed_hosts=hosts),
                               journal_every_s=spec.journal_every_s, replica=index)
        problem = self.chat.open_folder()  # FolderInUse is raised as it is: another process holds the folder
        if problem is not None:
            raise ReplicaError(f"replica {index} cannot record in {self.chat.sessions_dir}: {problem}")
        self.components = self.chat.preload().components
        config = uvicorn.Config(standalone_app(self.chat), host=host, port=0, log_level="warning",
                                **uvicorn_options(self.chat))
        self._uvicorn = GracefulServer(config, self.chat, spec.drain_timeout_s)
        self._drain_timeout_s = spec.drain_timeout_s
        self._stopping = False
        self._thread = threading.Thread(target=self._uvicorn.run, name=f"kame-replica-{index}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self._uvicorn.should_exit = True
                raise ReplicaError(f"replica {index}'s server did not start listening on {host}")
            time.sleep(0.05)
        port = self._uvicorn.servers[0].sockets[0].getsockname()[1]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        log.info("replica %d serving at ws://%s (sessions in %s)", index, self.address, self.chat.sessions_dir)

    def door_token(self) -> str:
        """The token its websocket admits: what a door joining running replicas sends (``serve --door-only``; only
        a member of the Ray cluster can call this)."""
        return self._token

    def capacity(self) -> ReplicaCapacity:
        """Its sessions at once and the most replicas its door may run: what a joining door sizes itself by."""
        return self._capacity

    def status(self) -> dict[str, Any]:
        """Where it listens, its process, its components and its readiness (:meth:`ChatServer.readiness`)."""
        _, body = self.chat.readiness()
        return {**body, "replica": self.index, "address": self.address, "pid": os.getpid(),
                "components": self.components}

    def metrics(self) -> str:
        """Its ``/metrics`` text (Prometheus)."""
        return self.chat.metrics.exposition().decode("utf-8")

    def check_health(self) -> None:
        """Serve's health check: raises (and Serve replaces this replica) when its server stopped unasked."""
        if not self._stopping and not self._thread.is_alive():
            raise ReplicaError(f"replica {self.index}'s server stopped")

    def stop(self) -> bool:
        """End every live session as a shutdown does (saved, told ``saved``, closed 1001), then stop listening;
        whether the server stopped in time."""
        self._stopping = True
        self._uvicorn.should_exit = True
        self._thread.join(self._drain_timeout_s + 10.0)
        return not self._thread.is_alive()

    def __del__(self) -> None:  # Serve's graceful shutdown of the replica
        if getattr(self, "_thread", None) is not None and self._thread.is_alive():
            self.stop()


def _node_address() -> str:
    """This node's address as Ray knows it (other nodes reach it there)."""
    import ray

    return str(ray.util.get_node_ip_address())


class ServeLink:
    """The ingress's line to replica ``index``: its Serve handle's calls, awaited on the ingress's loop."""

    def __init__(self, index: int, handle: Any) -> None:
        self.index, self._handle = index, handle

    async def status(self) -> dict[str, Any]:
        return dict(await self._handle.status.remote())

    async def metrics(self) -> str:
        return str(await self._handle.metrics.remote())

    async def stop(self) -> bool:
        return bool(await self._handle.stop.remote())

    def door_token(self) -> str:
        """The token the replica's websocket admits (blocking: not on an event loop)."""
        return str(self._handle.door_token.remote().result(timeout_s=30))

    def capacity(self) -> ReplicaCapacity:
        """The replica's :meth:`LiveReplica.capacity` (blocking: not on an event loop)."""
        found = self._handle.capacity.remote().result(timeout_s=30)
        if not isinstance(found, ReplicaCapacity):
            raise ReplicaError(f"replica {self.index} answered its capacity with {type(found).__name__}")
        return found


class RayReplicas:
    """``count`` replicas of ``spec`` on Ray Serve, from the launching process: :meth:`start` starts or joins Ray
    (``address``; None: a local Ray, shut down by :meth:`close`), starts Serve without its HTTP proxy (the
    ingress is ours) and deploys the replicas (``gpus`` and ``cpus`` each), all loading at once; :meth:`close`
    deletes them. ``links`` are the ingress's lines to them."""

    def __init__(self, spec: ReplicaSpec, count: int, *, address: str | None = None, gpus: float = 0.0,
                 cpus: float = 1.0, most: int | None = None, join: bool = False) -> None:
        if join and address is None:
            raise ValueError("a door that joins running replicas needs the Ray cluster's address (--ray-address)")
        if count < 1 or gpus < 0 or cpus <= 0 or (most is not None and most < count):
            raise ValueError("replicas must be >= 1 (at most as many as the most), GPUs per replica >= 0 and CPUs "
                             "per replica > 0")
        self.spec, self.count, self.address, self.gpus, self.cpus = spec, count, address, gpus, cpus
        self.most = most or count  # a local Ray is started with room for this many
        self.links: list[ServeLink] = []
        #: this node's address in Ray once started (the replicas of a local Ray listen there: loopback unless
        #: Ray was told otherwise)
        self.node_address: str | None = None
        self._ray_started_here = False
        self._deployment: Any = None
        self._growing: int | None = None  # the replica :meth:`grow` is starting
        #: a door of its own in front of replicas another door started (``serve --door-only``): :meth:`start`
        #: finds them, :meth:`close` leaves them running
        self.joined = join
        #: what the replicas run at once, as the door that started them set it (a joining door asks replica 0)
        self.capacity = spec.capacity()
        #: the token the replicas admit (a joining door learns it from replica 0)
        self.token = spec.token

    def start(self) -> list[ServeLink]:
        """Deploy and wait until every replica listens (models loaded, journals recovered); the links. A joining
        door (``join``) deploys nothing: see :meth:`_join`."""
        if self.joined:
            return self._join()
        if self.address is None:
            keep_local_ray_on_loopback()  # before Ray is first imported here: a local Ray listens on loopback only
            run_local_ray_workers_at_full_priority()  # sessions are real time (docs/deploy.md)
        try:
            from ray import serve
        except ImportError as err:
            raise ReplicaError("--replicas needs Ray Serve: .venv/bin/pip install -c constraints.txt "
                               f"-r requirements-ray.txt ({err})") from None

        # the one way this project starts or joins Ray (a local Ray with a CPU per replica, or ``address``)
        executor = RayExecutor(address=self.address, workers=self.most, cpus_per_worker=self.cpus)
        self._ray_started_here = executor.connect()
        self.node_address = executor.node_address
        serve.start(proxy_location="Disabled")
        self._deployment = serve.deployment(
            num_replicas=1, ray_actor_options={"num_cpus": self.cpus, "num_gpus": self.gpus},
            health_check_period_s=HEALTH_CHECK_PERIOD_S, health_check_timeout_s=HEALTH_CHECK_TIMEOUT_S,
            graceful_shutdown_timeout_s=self.spec.drain_timeout_s + 10.0, max_ongoing_requests=16)(LiveReplica)
        targets = [self._target(k) for k in range(self.count)]
        try:
            handles = serve.run_many(targets)
        except Exception as err:  # a constructor that failed: its error, plainly
            why = _why_failed(serve, self.count) or f"{type(err).__name__}: {err}"
            self.close()
            raise ReplicaError(f"the replicas could not start: {why}") from None
        self.links = [ServeLink(k, handle) for k, handle in enumerate(handles)]
        return self.links

    def _join(self) -> list[ServeLink]:
        """The replicas already running on the cluster at ``address`` (its Serve applications ``kame-replica-K``,
        in order of K), their links, and the token they admit (asked of the first); :class:`ReplicaError` when there
        are none."""
        import importlib.util

        if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.serve") is None:
            raise ReplicaError("--door-only needs Ray Serve: .venv/bin/pip install -c constraints.txt "
                               "-r requirements-ray.txt")
        executor = RayExecutor(address=self.address, workers=1, cpus_per_worker=self.cpus)
        self._ray_started_here = executor.connect()
        self.node_address = executor.node_address
        links = self.running_links()
        if not links:
            raise ReplicaError(f"no running replicas ({APP_PREFIX}K) on the Ray cluster at {self.address}: start "
                               "them with serve --replicas N first")
        self.token = links[0].door_token()
        self.capacity = links[0].capacity()
        return links

    def running_links(self) -> list[ServeLink]:
        """The links of the replicas running on the cluster now (its ``kame-replica-K`` applications), in order of K;
        a replica known before keeps its link. A joined door asks this again and again (:attr:`.Ingress.follow`)."""
        from ray import serve

        known = {link.index: link for link in self.links}
        indices = sorted(int(name[len(APP_PREFIX):]) for name, app in serve.status().applications.items()
                         if name.startswith(APP_PREFIX) and name[len(APP_PREFIX):].isdigit()
                         and str(getattr(app, "status", "")).endswith("RUNNING"))
        self.links = [known.get(k) or ServeLink(k, serve.get_app_handle(f"{APP_PREFIX}{k}")) for k in indices]
        self.count = self.most = max(1, len(self.links))
        return self.links

    def _target(self, index: int) -> Any:
        from ray.serve.api import RunTarget

        return RunTarget(self._deployment.options(name=f"replica-{index}").bind(self.spec, index),
                         name=f"{APP_PREFIX}{index}", route_prefix=None)

    def grow(self, timeout_s: float = GROW_TIMEOUT_S) -> ServeLink:
        """Deploy replica ``count`` (blocking until it listens, at most ``timeout_s``: on a cluster it may wait
        for a node) and its link; :class:`ReplicaError` says why not (the half-started replica is deleted)."""
        import ray
        from ray import serve

        index = self.count
        name = f"{APP_PREFIX}{index}"
        if self.address is None:  # a local Ray cannot grow: a replica that never fits would wait the whole timeout
            free = ray.available_resources()
            if free.get("CPU", 0.0) < self.cpus or free.get("GPU", 0.0) < self.gpus:
                raise ReplicaError(f"replica {index} does not fit this machine's Ray (free: {free.get('CPU', 0):g} "
                                   f"CPU, {free.get('GPU', 0):g} GPU; a replica takes {self.cpus:g} and "
                                   f"{self.gpus:g})")
        deadline = time.monotonic() + timeout_s
        self._growing = index
        try:
            handle = serve.run_many([self._target(index)], wait_for_applications_running=False)[0]
            while True:
                application = serve.status().applications.get(name)
                state = str(getattr(application, "status", ""))
                if state.endswith("RUNNING"):
                    break
                if state.endswith("DEPLOY_FAILED") or time.monotonic() > deadline:
                    why = _why_failed(serve, index + 1, first=index) or (
                        f"not running within {timeout_s:g} s (state {state or 'unknown'})")
                    raise ReplicaError(f"replica {index} could not start: {why}")
                time.sleep(0.5)
        except BaseException:
            with contextlib.suppress(Exception):
                serve.delete(name)
            raise
        finally:
            self._growing = None
        self.count += 1
        link = ServeLink(index, handle)
        self.links.append(link)
        return link

    def shrink(self, index: int) -> None:
        """Delete replica ``index``, the newest (its sessions end as a shutdown ends them; the door sends it none
        before); ``ValueError`` for any other, or the last."""
        from ray import serve

        if index != self.count - 1 or self.count <= 1:
            raise ValueError(f"replica {index} is not removed: only the newest ({self.count - 1}) goes, and never "
                             "the last")
        serve.delete(f"{APP_PREFIX}{index}")
        self.count -= 1
        self.links = [link for link in self.links if link.index != index]

    def close(self) -> None:
        """Delete the replicas (each is stopped as :meth:`LiveReplica.stop` does); shut Ray down if it was
        started here (a joined cluster keeps running, and so do its other Serve applications)."""
        try:
            import ray
            from ray import serve
        except ImportError:
            return
        if not ray.is_initialized():
            return
        if self.joined:  # the replicas are another door's
            if self._ray_started_here:
                ray.shutdown()
            return
        try:
            if self._ray_started_here:
                serve.shutdown()
            else:
                growing = [] if self._growing is None else [self._growing]
                for k in [*range(self.count), *growing]:
                    serve.delete(f"{APP_PREFIX}{k}")
        finally:
            if self._ray_started_here:
                ray.shutdown()
                self._ray_started_here = False


class ReplicatedChat:
    """``count`` replicas of ``spec`` behind one :class:`~.ingress.Ingress`, with a single server's face where a
    door is used (:class:`~.lifecycle.Door`; ``access``, ``tickets``, ``sessions_dir``, :meth:`open_folder`,
    :meth:`recording_problem`, :meth:`preload`, :meth:`mount`): what ``serve --replicas N`` and the app's
    ``KAME_REPLICAS`` run. :meth:`preload` starts the replicas (each loads its models, opens its folder
    ``replica-K`` and recovers its journals); :meth:`close` deletes them (and a local Ray started here).
    ``scaling``: add and remove replicas between its minimum (``count``) and maximum (:mod:`.scaling`). ``join``:
    another door in front of the replicas already running on the cluster at ``address`` (``serve --door-only``):
    :meth:`preload` finds them, :meth:`close` leaves them running; such a door does not scale (the door that
    started them does)."""

    def __init__(self, spec: ReplicaSpec, count: int, *, access: Access, address: str | None = None,
                 gpus: float = 0.0, scaling: ScalingRule | None = None, join: bool = False) -> None:
        if join and scaling is not None:
            raise ValueError("a door that joins running replicas does not add or remove them: the door that started "
                             "them scales (drop --max-replicas)")
        if scaling is not None and scaling.min_replicas != count:
            raise ValueError(f"the scaling rule's minimum ({scaling.min_replicas}) is the replicas started ({count})")
        self.spec, self.access, self.scaling = spec, access, scaling
        self.replicas = RayReplicas(spec, count, address=address, gpus=gpus,
                                    most=scaling.max_replicas if scaling is not None else None, join=join)
        self.tickets = TicketBook()  # the ingress redeems them: the page's tickets are made before it exists
        self.ingress: Ingress | None = None

    @property
    def limits(self) -> Limits:
        return self.spec.limits

    @property
    def max_sessions(self) -> int | None:
        """Sessions at once through the door: every replica's (its session limit, else its pool's slots), at the
        most replicas (None: no limit). A joined door counts as the replicas' own door set them (asked of them at
        :meth:`preload`), whatever its own options say."""
        capacity = self.replicas.capacity
        most = self.scaling.max_replicas if self.scaling is not None else self.replicas.count
        if self.replicas.joined and capacity.most_replicas is not None:
            most = capacity.most_replicas  # the first door's scaling, which a joined door follows
        return None if capacity.sessions_each is None else capacity.sessions_each * most

    @property
    def sessions_dir(self) -> Path:
        return self.spec.sessions_dir

    def open_folder(self) -> str | None:
        """Nothing to open here: each replica opens its own folder as it starts (a problem fails its start)."""
        return None

    def recording_problem(self) -> str | None:
        return None

    def preload(self) -> Ingress:
        """Start the replicas (once) and the ingress in front of them; :class:`ReplicaError` says why not."""
        if self.ingress is None:
            links: list[ReplicaLink] = list(self.replicas.start())
            scaling = None if self.scaling is None else Scaling(
                self.scaling, grow=lambda: asyncio.to_thread(self.replicas.grow),
                shrink=lambda index: asyncio.to_thread(self.replicas.shrink, index))
            self.ingress = Ingress(links, self.replicas.token, access=self.access, limits=self.spec.limits,
                                   tickets=self.tickets, scaling=scaling, owns_replicas=not self.replicas.joined,
                                   follow=self._running_links if self.replicas.joined else None)
        return self.ingress

    async def _running_links(self) -> list[ReplicaLink]:
        """The replicas running now, as a joined door follows them (:attr:`.Ingress.follow`)."""
        return list(await asyncio.to_thread(self.replicas.running_links))

    def mount(self, app: Any, path: str = ROUTE) -> None:
        """The ingress's routes on ``app`` (``/api/chat``, ``/healthz``, ``/readyz``, ``/metrics``)."""
        if path != ROUTE:
            raise ValueError(f"the replicas' door serves the protocol at {ROUTE}, not {path}")
        self.preload().mount(app)

    def exposure(self, host: str) -> list[str]:
        """What listens where besides the door on ``host``, once :meth:`preload` started the replicas: said when the
        door or Ray listens beyond loopback; nothing for a door on loopback whose local Ray is on loopback with Ray's
        token authentication (Ray Serve's gRPC port in each replica, on every interface, then refuses strangers)."""
        where = "docs/deploy.md, \"What listens where\""
        token, mode = token_auth_on(), f"{RAY_AUTH_MODE}={ray_auth_mode()!r}"
        auth = "Ray's token authentication on" if token else f"no authentication: {mode}"
        address, node = self.replicas.address, self.replicas.node_address or "?"
        if address is not None:
            return [f"the Ray cluster at {address}: its GCS, raylets, workers and agents listen on every interface of "
                    f"its nodes and each replica on its node's address, on ports Ray picks ({auth}; a replica's "
                    f"websocket admits only the door, by its token): let only the cluster's nodes reach them ({where})"]
        if not is_loopback(node):
            return [f"the local Ray listens beyond this machine: its GCS, raylet, workers and agents on every "
                    f"interface and the replicas on {node}, on ports Ray picks ({auth}); firewall them, or leave "
                    f"{RAY_ONE_MACHINE} unset and let the door be the first to import Ray ({where})"]
        serve_grpc = "Ray Serve's gRPC port in each replica listens on every interface (Ray Serve binds it so)"
        if token and is_loopback(host):
            return []
        if token:
            return [f"the door listens on {host}; the local Ray (its GCS, raylet, workers and agents) and the "
                    f"replicas' websockets on {node}, this machine only; {serve_grpc} and refuses calls without "
                    f"Ray's token ({where})"]
        return [f"{serve_grpc} and takes calls with no authentication ({mode}): firewall it, or leave "
                f"{RAY_AUTH_MODE} unset; the door listens on {host}, the rest of the local Ray on {node} ({where})"]

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """End every live session as a shutdown does (each replica saves and says so); whether in time."""
        return True if self.ingress is None else await self.ingress.drain(timeout_s)

    def close(self) -> None:
        self.replicas.close()


def _why_failed(serve: Any, count: int, first: int = 0) -> str:
    """The error a replica's constructor raised, as Serve's status keeps it (the last line of its traceback):
    the first replica's (from ``first`` to ``count`` - 1) that has one, with its index; "" when none says."""
    try:
        applications = serve.status().applications
    except Exception:  # noqa: BLE001 - Serve itself is gone: the caller says what it knows
        return ""
    for k in range(first, count):
        application = applications.get(f"{APP_PREFIX}{k}")
        for deployment in (application.deployments.values() if application is not None else ()):
            lines = [line.strip() for line in str(deployment.message).splitlines() if line.strip()]
            starts = [n for n, line in enumerate(lines) if _RAISED.match(line)]
            if lines:  # the last exception raised, its own lines, without its module path
                return f"replica {k}: " + _RAISED.sub(r"\1: ", " ".join(lines[starts[-1] if starts else -1:]), 1)
    return ""
