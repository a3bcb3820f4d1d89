"""The last answers of a deterministic computation, kept by their question: a small thread-safe LRU map.

Used where the same input always gives the same output and re-runs ask again (SmolLM2's greedy answers, Piper's
sentences). One per owner instance: nothing is kept at module level.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """The newest values by key; the oldest go once there are more than the ``limit`` a :meth:`put` names."""

    def __init__(self) -> None:
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the newest), or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: V, limit: int) -> None:
        """Keep ``value`` for ``key`` as the newest, and at most ``limit`` values."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > limit:
                self._values.popitem(last=False)
