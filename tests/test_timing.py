"""The one timing summary benchmarks print: nearest-rank percentiles, always one of the values."""
from __future__ import annotations

import pytest

from kame_core.testing.timing import Timing, percentile


def test_nearest_rank_percentiles():
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 50) == 50 and percentile(values, 90) == 90 and percentile(values, 99) == 99
    assert percentile(values, 100) == 100 and percentile([7.0], 99) == 7.0
    assert percentile([3, 1, 2], 50) == 2  # unsorted input
    assert percentile(list(range(50)), 99) == 49  # p99 of 50 samples is the largest
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="q must be"):
        percentile([1.0], 0)


def test_timing_is_in_milliseconds():
    t = Timing.of([0.010, 0.020, 0.030, 0.040])
    assert (t.median_ms, t.p90_ms, t.p99_ms, t.max_ms, t.samples) == pytest.approx((25.0, 40.0, 40.0, 40.0, 4))
