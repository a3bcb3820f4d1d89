"""The default executor: items run in this process, or in a spawn process pool in batches of items."""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .base import ExecutorError, Outcome, WorkerFactory, describe_error

#: (index, value, error, attempts) -- what a batch sends back to the driver
_Row = tuple[int, Any, "str | None", int]


def run_item(worker: Callable[[Any], Any], item: Any, retries: int) -> tuple[Any, str | None, int]:
    """Call ``worker(item)`` up to ``1 + retries`` times; ``(value, None, attempts)`` or ``(None, error, attempts)``."""
    error = None
    for attempt in range(1, retries + 2):
        try:
            return worker(item), None, attempt
        except Exception as exc:  # an item's failure is reported, never raised: one bad item must not stop a run
            error = describe_error(exc)
    return None, error, retries + 1


def run_batch(worker_factory: WorkerFactory, batch: Sequence[tuple[int, Any]], retries: int) -> list[_Row]:
    """Process-pool entry point: one worker for the batch, one row per item."""
    worker = worker_factory()
    return [(index, *run_item(worker, item, retries)) for index, item in batch]


class LocalExecutor:
    """``workers <= 1``: one worker in this process (built only if there is an item), fed by ``threads`` threads
    at once (a thread-safe worker: concurrent sessions stepping one model's session pool). Otherwise a spawn
    process pool (no forked copies of loaded models or threads): each task builds one worker for
    ``batch_size`` items."""

    name = "local"

    def __init__(self, workers: int = 1, batch_size: int = 1, retries: int = 1, threads: int = 1) -> None:
        if threads > 1 and workers > 1:
            raise ExecutorError("threads share one worker in this process: use workers=1 with threads > 1")
        self.workers, self.batch_size, self.retries = workers, max(1, batch_size), retries
        self.threads = max(1, threads)

    def map(self, worker_factory: WorkerFactory, items: Sequence[Any]) -> Iterator[Outcome]:
        if not items:
            return
        if self.workers <= 1 and self.threads > 1:
            yield from self._map_threads(worker_factory(), items)
            return
        if self.workers <= 1:
            worker = worker_factory()
            for index, item in enumerate(items):
                yield Outcome(index, item, *run_item(worker, item, self.retries))
            return
        indexed = list(enumerate(items))
        batches = [indexed[i : i + self.batch_size] for i in range(0, len(indexed), self.batch_size)]
        context = multiprocessing.get_context("spawn")
        with futures.ProcessPoolExecutor(max_workers=self.workers, mp_context=context) as pool:
            jobs = [pool.submit(run_batch, worker_factory, batch, self.retries) for batch in batches]
            try:
                for job in futures.as_completed(jobs):
                    for index, value, error, attempts in job.result():
                        yield Outcome(index, items[index], value, error, attempts)
            except BrokenProcessPool as exc:
                pool.shutdown(cancel_futures=True)
                raise ExecutorError(f"a local worker process died ({exc}); finished items are kept, rerun to "
                                    "resume (or use --executor ray, which replaces dead workers)") from exc
            except BaseException:  # a worker could not start (no TTS, ...), or the driver was interrupted
                pool.shutdown(cancel_futures=True)
                raise

    def _map_threads(self, worker: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Outcome]:
        with futures.ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="kame-item") as pool:
            jobs = {pool.submit(run_item, worker, item, self.retries): index for index, item in enumerate(items)}
            try:
                for job in futures.as_completed(jobs):
                    index = jobs[job]
                    yield Outcome(index, items[index], *job.result())
            except BaseException:  # the driver was interrupted: items not started are dropped
                pool.shutdown(cancel_futures=True)
                raise
