"""Where batch work runs: on this machine (default) or on a Ray cluster.

* :mod:`.base`  -- the :class:`Executor` contract (a picklable worker factory, items in, one
  :class:`Outcome` per item streamed back), bounded retries
* :mod:`.factory` -- :func:`make_executor`: an executor by name
* :mod:`.local` -- :class:`LocalExecutor`: this process, or a spawn process pool in batches
* :mod:`.ray_executor` -- :class:`RayExecutor`: one Ray actor per worker (models loaded once per actor),
  results streamed to the driver, a killed actor replaced and its items retried. Ray is an optional extra
  (``requirements-ray.txt``); it is imported only when a Ray executor is made, never by importing this package.

The driver alone writes results (dataset files, caches): workers only compute and return values.
"""
from .base import (
                   EXECUTOR_CHOICES,
                   Executor,
                   ExecutorError,
                   ExecutorUnavailable,
                   Outcome,
                   WorkerFactory,
                   ray_available,
)
from .factory import make_executor
from .local import LocalExecutor

__all__ = ["EXECUTOR_CHOICES", "Executor", "ExecutorError", "ExecutorUnavailable", "LocalExecutor", "Outcome",
           "WorkerFactory", "make_executor", "ray_available"]
