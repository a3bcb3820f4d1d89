"""Ray executor: one actor per worker, models loaded once per actor, results streamed back to the driver.

Without an address, :meth:`RayExecutor.map` starts a local Ray with ``workers`` CPUs (no dashboard, worker
logs not forwarded) and shuts it down afterwards; with ``address`` it connects to that cluster
(``ray://host:10001`` or ``host:6379``; ``auto`` for the cluster this machine belongs to) and ships
``kame_core`` to the workers. When Ray is already initialised in this process it is used as it is.

A local Ray is this machine's only (:func:`keep_local_ray_on_loopback`): every service it starts (GCS, raylet,
workers, agents, metrics) listens on loopback, and takes Ray's token (Ray's default for a local Ray).
:meth:`RayExecutor.connect` is the one place this project starts or joins Ray (the executors and ``serve
--replicas``).

Every actor keeps at most ``in_flight`` items queued so a slow actor does not hoard work; ``concurrency`` > 1
runs that many of them at once in the actor, on threads (for a thread-safe worker, such as a session pool's).
``gpus_per_worker`` reserves GPUs per actor (Ray then shows each actor only its own); ``workers=0`` means one
actor per GPU of the cluster. An item whose worker raised is retried (at most ``retries`` more times); an actor
that dies (killed, out of memory, ``os._exit``) is replaced and each item it held is put back in the queue,
counting an attempt. An item's outcome is yielded once, when its one successful (or last) attempt returns, so
nothing is duplicated or lost. More replacements than ``workers × (retries + 1)`` mean workers cannot live here:
:class:`ExecutorError`. An actor whose worker cannot be built stops the run naming the actor, its node and the
reason. Each outcome names its actor, node and the worker's device (``Outcome.worker``; a worker with a
``where()`` method says its device).

Ray is imported inside the methods: importing this module (or :mod:`kame_core`) never imports it.
"""
from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .base import ExecutorError, Outcome, WorkerFactory, describe_error

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # kame_core/
_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # a local Ray's shared memory: results are streamed, not stored
#: a local Ray starts no idle workers ahead of the first task: this project's actors carry a runtime environment,
#: which such a worker lacks, so each was a Python process started for nothing (0.7 CPU-s a start on 2 cores)
LOCAL_RAY_SYSTEM_CONFIG = {"prestart_worker_first_driver": False}
#: actors when ``workers=0`` and the actors use no GPU
DEFAULT_CPU_WORKERS = 2
#: Ray's switch for a Ray of one machine (its default on macOS and Windows), read when a process first imports Ray:
#: "0" makes the node's address loopback, where every service of a local Ray then listens
RAY_ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Ray's authentication, which Ray turns on ("token") for a new local Ray unless it is set: every call to its services
#: then carries Ray's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``, written by Ray)
RAY_AUTH_MODE = "RAY_AUTH_MODE"
#: Ray's setting of its workers' niceness (default 15: a worker yields the CPU to every other process)
RAY_WORKER_NICENESS = "RAY_worker_niceness"


def keep_local_ray_on_loopback() -> None:
    """Before a local Ray starts: every service it starts listens on loopback only (:data:`RAY_ONE_MACHINE` = 0 in
    this process's environment, which Ray's processes inherit; a value already set is kept: the operator's word).
    Ray reads it when this process first imports Ray: call this before (:meth:`RayExecutor.connect` does; a Ray
    imported earlier keeps the node's own address, on every interface)."""
    os.environ.setdefault(RAY_ONE_MACHINE, "0")


def run_local_ray_workers_at_full_priority() -> None:
    """Before a local Ray starts: its workers run at niceness 0, not Ray's 15 (:data:`RAY_WORKER_NICENESS` in this
    process's environment, inherited by Ray's processes; a value already set is kept: the operator's word). Live
    replicas are real time: at 15 they would yield the CPU to every other process."""
    os.environ.setdefault(RAY_WORKER_NICENESS, "0")


def ray_auth_mode() -> str:
    """:data:`RAY_AUTH_MODE` as this process has it ("" when unset)."""
    return os.environ.get(RAY_AUTH_MODE, "")


def token_auth_on() -> bool:
    """Whether Ray's token authentication is on for the Ray this process started or joined (Ray sets
    :data:`RAY_AUTH_MODE` when it turns it on by itself)."""
    return ray_auth_mode().strip().lower() == "token"


class RayWorker:
    """The actor: builds its worker once, then runs items (one at a time, or on threads with the actor's
    ``max_concurrency``). A worker that cannot be built is reported by :meth:`ready` (its error, plainly)
    instead of killing the actor in its constructor."""

    def __init__(self, worker_factory: WorkerFactory) -> None:
        self._work: Any = None
        self._error: str | None = None
        try:
            self._work = worker_factory()
        except Exception as exc:  # reported by ready(): the driver stops the run with this reason
            self._error = describe_error(exc)

    def ready(self) -> tuple[str | None, str]:
        """(None when the worker was built, else why not; where this actor runs)."""
        return self._error, self.where()

    def where(self) -> str:
        """The worker's device (its ``where()``, when it has one), node address, host, process and GPU ids."""
        import ray

        device = ""
        describe = getattr(self._work, "where", None)
        if callable(describe):
            try:
                device = str(describe())
            except Exception as exc:  # naming the device must never fail an item
                device = f"device unknown ({describe_error(exc)})"
        gpus = ray.get_gpu_ids()
        place = (f"node {ray.util.get_node_ip_address()} (host {socket.gethostname()}, pid {os.getpid()}"
                 + (f", Ray GPU id {','.join(str(g) for g in gpus)}" if gpus else "") + ")")
        return f"{device} on {place}" if device else place

    def run(self, item: Any) -> tuple[str, Any]:
        """(where it ran, the worker's value)."""
        if self._work is None:
            raise ExecutorError(f"this Ray worker could not start: {self._error}")
        value = self._work(item)
        return self.where(), value


def _cause(exc: BaseException) -> str:
    """The worker's own exception inside a RayTaskError (its type and message), else the error itself."""
    cause = getattr(exc, "cause", None)
    return describe_error(cause) if isinstance(cause, BaseException) else describe_error(exc)


class RayExecutor:
    """Items over ``workers`` Ray actors (``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs each, None: 1
    when the cluster has a GPU, else 0; ``concurrency`` items at once each); see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int = 2, retries: int = 1, cpus_per_worker: float = 1,
                 in_flight: int = 2, runtime_env: dict[str, Any] | None = None,
                 gpus_per_worker: float | None = 0, concurrency: int = 1) -> None:
        if workers < 0 or retries < 0 or in_flight < 1 or cpus_per_worker <= 0 or concurrency < 1 \
                or (gpus_per_worker is not None and gpus_per_worker < 0):
            raise ValueError("workers must be >= 0 (0: one per GPU), in_flight and concurrency >= 1, retries >= 0, "
                             "cpus_per_worker > 0, gpus_per_worker >= 0")
        self.address, self.workers, self.retries = address, workers, retries
        self.cpus_per_worker, self.in_flight, self.runtime_env = cpus_per_worker, in_flight, runtime_env
        self.gpus_per_worker, self.concurrency = gpus_per_worker, concurrency
        self.replaced_workers = 0  # actors that died and were replaced in the last map()
        #: this node's address in Ray once connected, where a local Ray's services listen (loopback: this machine's
        #: only); None before
        self.node_address: str | None = None

    # ---------------------------------------------------------------------------------------------- Ray set-up
    def _runtime_env(self) -> dict[str, Any]:
        if self.runtime_env is not None:
            return self.runtime_env
        if self.address:  # a cluster's workers may not have this checkout: ship the package
            return {"py_modules": [str(_PACKAGE_DIR)]}
        # a local Ray's workers import kame_core (and the worker factory's module) from this checkout; this
        # process's PYTHONPATH goes on to them (a documented exception to "only kame_core.settings reads the
        # environment": it is the interpreter's, not a KAME setting)
        paths = [str(_PACKAGE_DIR.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}

    def connect(self) -> bool:
        """Initialise Ray if needed (the one way this project starts or joins Ray: executors and `serve --replicas`;
        a local Ray on loopback, :func:`keep_local_ray_on_loopback`); True when this call started it (and so must shut
        it down). Sets :attr:`node_address`."""
        if not self.address:
            keep_local_ray_on_loopback()  # before this process first imports Ray
        import ray

        started = not ray.is_initialized()
        if started:
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "runtime_env": self._runtime_env(), "configure_logging": False}
            if self.address:
                ray.init(address=self.address, **options)
            else:  # workers=0 (one per GPU): Ray counts this machine's CPUs and GPUs itself
                cpus = int(max(1, round(self.workers * self.cpus_per_worker))) if self.workers else None
                ray.init(num_cpus=cpus, object_store_memory=_OBJECT_STORE_BYTES,
                         _system_config=dict(LOCAL_RAY_SYSTEM_CONFIG), **options)
        self.node_address = str(ray.util.get_node_ip_address())
        return started

    def _placement(self, ray: Any) -> tuple[int, float]:
        """(actors, GPUs per actor) on the connected cluster; :class:`ExecutorError` when they cannot fit."""
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0))
        gpus = self.gpus_per_worker if self.gpus_per_worker is not None else (1.0 if cluster_gpus else 0.0)
        workers = self.workers
        if not workers:
            workers = int(cluster_gpus // gpus) if gpus else DEFAULT_CPU_WORKERS
            if workers < 1:
                raise ExecutorError(f"one Ray actor per GPU, but the Ray cluster has no GPU (or less than "
                                    f"{gpus:g}); give the number of actors, or run on the CPU")
        # a cluster may grow (an autoscaler); a local Ray cannot: actors that never fit would wait forever
        if gpus and not self.address and workers * gpus > cluster_gpus:
            raise ExecutorError(f"{workers} Ray actor(s) x {gpus:g} GPU need {workers * gpus:g} GPU(s); this machine's "
                                f"Ray sees {cluster_gpus:g}: use fewer actors")
        return workers, gpus

    # ------------------------------------------------------------------------------------------------- running
    def map(self, worker_factory: WorkerFactory, items: Sequence[Any]) -> Iterator[Outcome]:
        if not items:
            return
        import ray

        started_here = self.connect()
        actors: list[Any] = []
        self.replaced_workers = 0
        try:
            workers, gpus = self._placement(ray)
            resources: dict[str, Any] = {"num_cpus": self.cpus_per_worker, "num_gpus": gpus,
                                         "max_concurrency": self.concurrency}
            actor_class = ray.remote(max_restarts=0, max_task_retries=0, **resources)(RayWorker)
            actors = [actor_class.remote(worker_factory) for _ in range(min(workers, len(items)))]
            checks = [a.ready.remote() for a in actors]
            for slot, check in enumerate(checks):  # a worker that cannot start (no TTS, no model) stops the run
                try:
                    error, where = ray.get(check)
                except ray.exceptions.RayError as exc:
                    raise ExecutorError(f"Ray actor {slot} could not start: {_cause(exc)}") from exc
                if error:
                    raise ExecutorError(f"Ray actor {slot} on {where} could not start: {error}")
            yield from self._drive(ray, lambda: actor_class.remote(worker_factory), actors, items)
        finally:
            for actor in actors:
                try:
                    ray.kill(actor)
                except Exception:  # already dead or Ray shutting down: nothing to release
                    pass
            if started_here:
                ray.shutdown()

    def _drive(self, ray: Any, new_actor: Callable[[], Any], actors: list[Any],
               items: Sequence[Any]) -> Iterator[Outcome]:
        """Feed ``actors`` (replaced in place when one dies, so the caller releases the live ones)."""
        queue: deque[int] = deque(range(len(items)))
        attempts = [0] * len(items)
        pending: dict[Any, tuple[int, int]] = {}  # object ref -> (actor slot, item index)
        load = [0] * len(actors)
        max_replacements = len(actors) * (self.retries + 1)

        def submit() -> None:
            for slot in range(len(actors)):
                while queue and load[slot] < max(self.in_flight, self.concurrency):
                    index = queue.popleft()
                    attempts[index] += 1
                    pending[actors[slot].run.remote(items[index])] = (slot, index)
                    load[slot] += 1

        def replace(slot: int, why: str) -> None:
            self.replaced_workers += 1
            if self.replaced_workers > max_replacements:
                raise ExecutorError(f"{self.replaced_workers} Ray workers died (last: {why}); giving up")
            try:
                ray.kill(actors[slot])
            except Exception:  # it is dead already
                pass
            actors[slot] = new_actor()
            load[slot] = 0
            for ref, (s, index) in list(pending.items()):  # items queued on it never ran: queue them again
                if s == slot:
                    del pending[ref]
                    attempts[index] -= 1
                    queue.appendleft(index)

        submit()
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            slot, index = pending.pop(ref)
            load[slot] -= 1
            try:
                where, value = ray.get(ref)
            except ray.exceptions.RayActorError as exc:  # the worker process died (this item may have killed it)
                replace(slot, describe_error(exc).splitlines()[0])
                if attempts[index] <= self.retries:
                    queue.appendleft(index)
                else:
                    yield Outcome(index, items[index], None, f"worker died: {_cause(exc).splitlines()[0]}",
                                  attempts[index])
            except ray.exceptions.RayError as exc:  # the worker raised on this item
                if attempts[index] <= self.retries:
                    queue.append(index)
                else:
                    yield Outcome(index, items[index], None, _cause(exc), attempts[index])
            else:
                yield Outcome(index, items[index], value, None, attempts[index], f"actor {slot}: {where}")
            submit()
