"""Ray executor: one actor per worker, models loaded once per actor, results streamed back to the driver.

Without an address, :meth:`RayExecutor.map` starts a local Ray with ``workers`` CPUs (no dashboard, worker
logs not forwarded) and shuts it down afterwards; with ``address`` it connects to that cluster
(``ray://host:10001`` or ``host:6379``; ``auto`` for the cluster this machine belongs to) and ships
``kame_core`` to the workers. When Ray is already initialised in this process it is used as it is.

Every actor keeps at most ``in_flight`` items queued so a slow actor does not hoard work. An item whose worker
raised is retried (at most ``retries`` more times); an actor that dies (killed, out of memory, ``os._exit``)
is replaced and each item it held is put back in the queue, counting an attempt. An item's outcome is yielded
once, when its one successful (or last) attempt returns, so nothing is duplicated or lost. More replacements
than ``workers × (retries + 1)`` mean workers cannot live here: :class:`ExecutorError`.

Ray is imported inside the methods: importing this module (or :mod:`kame_core`) never imports it.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .base import ExecutorError, Outcome, WorkerFactory, describe_error

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # kame_core/
_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # a local Ray's shared memory: results are streamed, not stored


class RayWorker:
    """The actor: builds its worker once, then runs items one by one. A worker that cannot be built is
    reported by :meth:`ready` (its error, plainly) instead of killing the actor in its constructor."""

    def __init__(self, worker_factory: WorkerFactory) -> None:
        self._work: Any = None
        self._error: str | None = None
        try:
            self._work = worker_factory()
        except Exception as exc:  # reported by ready(): the driver stops the run with this reason
            self._error = describe_error(exc)

    def ready(self) -> str | None:
        """None when the worker was built, else why not."""
        return self._error

    def run(self, item: Any) -> Any:
        if self._work is None:
            raise ExecutorError(f"this Ray worker could not start: {self._error}")
        return self._work(item)


def _cause(exc: BaseException) -> str:
    """The worker's own exception inside a RayTaskError (its type and message), else the error itself."""
    cause = getattr(exc, "cause", None)
    return describe_error(cause) if isinstance(cause, BaseException) else describe_error(exc)


class RayExecutor:
    """Items over ``workers`` Ray actors (``cpus_per_worker`` CPUs each); see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int = 2, retries: int = 1, cpus_per_worker: float = 1,
                 in_flight: int = 2, runtime_env: dict[str, Any] | None = None) -> None:
        if workers < 1 or retries < 0 or in_flight < 1 or cpus_per_worker <= 0:
            raise ValueError("workers and in_flight must be >= 1, retries >= 0, cpus_per_worker > 0")
        self.address, self.workers, self.retries = address, workers, retries
        self.cpus_per_worker, self.in_flight, self.runtime_env = cpus_per_worker, in_flight, runtime_env
        self.replaced_workers = 0  # actors that died and were replaced in the last map()

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

    def _connect(self) -> bool:
        """Initialise Ray if needed; True when this call started it (and so must shut it down)."""
        import ray

        if ray.is_initialized():
            return False
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "runtime_env": self._runtime_env(), "configure_logging": False}
        if self.address:
            ray.init(address=self.address, **options)
        else:
            ray.init(num_cpus=int(max(1, round(self.workers * self.cpus_per_worker))),
                     object_store_memory=_OBJECT_STORE_BYTES, **options)
        return True

    # ------------------------------------------------------------------------------------------------- running
    def map(self, worker_factory: WorkerFactory, items: Sequence[Any]) -> Iterator[Outcome]:
        if not items:
            return
        import ray

        started_here = self._connect()
        actor_class = ray.remote(num_cpus=self.cpus_per_worker, max_restarts=0, max_task_retries=0)(RayWorker)
        actors: list[Any] = []
        self.replaced_workers = 0
        try:
            actors = [actor_class.remote(worker_factory) for _ in range(min(self.workers, len(items)))]
            try:  # a worker that cannot start (no TTS, no model) stops the run before any item is sent
                errors = [e for e in ray.get([a.ready.remote() for a in actors]) if e]
            except ray.exceptions.RayError as exc:
                raise ExecutorError(f"a Ray worker could not start: {_cause(exc)}") from exc
            if errors:
                raise ExecutorError(f"a Ray worker could not start: {errors[0]}")
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
                while queue and load[slot] < self.in_flight:
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
                value = ray.get(ref)
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
                yield Outcome(index, items[index], value, None, attempts[index])
            submit()
