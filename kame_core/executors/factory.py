"""Making an executor by name (``local`` or ``ray``): the one place that knows every kind."""
from __future__ import annotations

from .base import EXECUTOR_CHOICES, RAY_INSTALL_HINT, Executor, ExecutorUnavailable, ray_available

__all__ = ["make_executor"]


def make_executor(name: str, *, workers: int = 1, retries: int = 1, batch_size: int = 1,
                  ray_address: str | None = None, in_flight: int = 2, threads: int = 1,
                  gpus_per_worker: float | None = 0) -> Executor:
    """``local`` (``workers`` processes, 1 = this process, there with ``threads`` items at once on one worker) or
    ``ray`` (``workers`` actors, 0: one per GPU; a local Ray with ``workers`` CPUs when ``ray_address`` is None;
    ``in_flight`` items queued per actor: 1 for long items, so none waits behind another at the end; ``threads``
    items at once per actor; ``gpus_per_worker`` GPUs each, None: 1 when the cluster has GPUs). Raises
    :class:`ExecutorUnavailable` with the fix."""
    if workers < (0 if name == "ray" else 1) or retries < 0 or batch_size < 1 or threads < 1:
        raise ExecutorUnavailable("workers (Ray: 0 = one per GPU), threads and batch size must be >= 1, "
                                  "retries >= 0")
    if name == "local":
        if gpus_per_worker:
            raise ExecutorUnavailable("GPUs per worker need --executor ray")
        if ray_address:
            raise ExecutorUnavailable("--ray-address needs --executor ray")
        if threads > 1 and workers > 1:
            raise ExecutorUnavailable("concurrent items on one worker need workers = 1")
        from .local import LocalExecutor

        return LocalExecutor(workers=workers, batch_size=batch_size, retries=retries, threads=threads)
    if name == "ray":
        if not ray_available():
            raise ExecutorUnavailable(f"--executor ray needs Ray, which is not installed here; install it with "
                                      f"`{RAY_INSTALL_HINT}`")
        from .ray_executor import RayExecutor

        return RayExecutor(address=ray_address, workers=workers, retries=retries, in_flight=in_flight,
                           concurrency=threads, gpus_per_worker=gpus_per_worker)
    raise ExecutorUnavailable(f"unknown executor {name!r}; choose from {', '.join(EXECUTOR_CHOICES)}")
