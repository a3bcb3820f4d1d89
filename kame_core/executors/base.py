"""The executor contract shared by the dataset builder and the evaluation harness.

A *worker factory* is a picklable callable (a module-level function or class, or a ``functools.partial`` of
one) that builds a *worker*: a callable ``worker(item) -> value`` holding whatever is expensive to load (a
TTS, a speech stack). An executor builds as few workers as it can (one per process, actor or batch), feeds
them the items and yields exactly one :class:`Outcome` per item as soon as it is known, in completion order.
An item whose worker raised is retried up to ``retries`` more times; one that still fails comes back with its
error instead of a value, so one bad item never stops a long run.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: builds one worker (loads its models); must be picklable for process pools and Ray
WorkerFactory = Callable[[], Callable[[Any], Any]]

EXECUTOR_CHOICES = ("local", "ray")
RAY_INSTALL_HINT = "pip install -c constraints.txt -r requirements-ray.txt"


class ExecutorError(RuntimeError):
    """The executor itself cannot go on (a worker cannot start, too many workers died, a pool broke)."""


class ExecutorUnavailable(ExecutorError):
    """The requested executor cannot be used here (unknown name, Ray not installed, bad option)."""


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """What became of one item: ``value`` when ``error`` is None; ``attempts`` counts every try; ``worker`` names
    the worker of its last try where the executor knows more than "this machine" (a Ray actor: its number, node
    and device), else ''."""

    index: int
    item: T
    value: R | None
    error: str | None
    attempts: int
    worker: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    """Runs ``worker_factory()`` workers over items; see the module docstring for the contract."""

    name: str
    retries: int

    def map(self, worker_factory: WorkerFactory, items: Sequence[T]) -> Iterator[Outcome[T, Any]]:
        """Yield one :class:`Outcome` per item, in completion order. Raises :class:`ExecutorError`."""
        ...


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of an exception, as outcomes carry it."""
    return f"{type(exc).__name__}: {exc}"


def ray_available() -> bool:
    """Whether Ray can be imported here (checked without importing it)."""
    return importlib.util.find_spec("ray") is not None
