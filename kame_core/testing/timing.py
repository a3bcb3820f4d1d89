"""One way to summarise timings for benchmarks and tests: nearest-rank percentiles and a :class:`Timing`."""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Timing", "percentile"]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100): the smallest value with at least q % of the values at
    or below it -- always one of the values (p99 of 50 samples is the largest)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Timing:
    """Median, p90, p95, p99 and max of a set of durations, in milliseconds."""

    median_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    samples: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        ms = [s * 1000 for s in seconds]
        return cls(statistics.median(ms), percentile(ms, 90), percentile(ms, 95), percentile(ms, 99), max(ms),
                   len(ms))
