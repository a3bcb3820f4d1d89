"""When output audio is first *heard*: the listener's measure of a turn's latency.

An ASR's word timestamps can lead the audio by 0.3 s, and Full-Duplex-Bench clips negative latencies to 0, so a
latency read off the transcript can say 0.00 s where a listener waits 0.33 s. Here the output itself decides: the
start of the first 20 ms window whose RMS is above :data:`~kame_core.analysis.metrics.SILENCE_RMS` (-60 dBFS, the
level the rest of the analysis calls silence).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .metrics import SILENCE_RMS

#: the analysis window: 20 ms (a frame is 80 ms; 20 ms resolves a word's attack)
WINDOW_S = 0.02


def first_heard(audio: np.ndarray, sample_rate: int, *, from_s: float = 0.0, until_s: float = math.inf,
                level: float = SILENCE_RMS, window_s: float = WINDOW_S) -> float | None:
    """Start (seconds) of the first ``window_s`` window at or after ``from_s`` (and starting before ``until_s``)
    whose RMS is above ``level``; None if none is. Windows are on the grid of the audio's start; a NaN or infinite
    sample counts as loud."""
    return _first_window(audio, sample_rate, from_s, until_s, level, window_s, loud=True)


def first_quiet(audio: np.ndarray, sample_rate: int, *, from_s: float = 0.0, level: float = SILENCE_RMS,
                window_s: float = WINDOW_S) -> float | None:
    """Start (seconds) of the first ``window_s`` window at or after ``from_s`` whose RMS is at or below ``level``
    (:func:`first_heard`'s windows); None if none is."""
    return _first_window(audio, sample_rate, from_s, math.inf, level, window_s, loud=False)


def _first_window(audio: np.ndarray, sample_rate: int, from_s: float, until_s: float, level: float, window_s: float,
                  *, loud: bool) -> float | None:
    if sample_rate <= 0 or window_s <= 0 or not np.isfinite(from_s) or math.isnan(until_s):
        raise ValueError(f"first_heard: sample rate {sample_rate} and window {window_s} s must be positive, "
                         f"from_s finite ({from_s}), until_s a number ({until_s})")
    samples = np.asarray(audio).reshape(-1)
    size = max(1, int(round(window_s * sample_rate)))
    start = max(0, int(from_s * sample_rate) // size)  # the window that holds from_s
    n = len(samples) // size
    if until_s < math.inf:
        n = min(n, max(0, math.ceil(until_s * sample_rate / size)))
    if start >= n:
        return None
    windows = samples[start * size: n * size].astype(np.float64).reshape(-1, size)
    with np.errstate(invalid="ignore", over="ignore"):
        rms = np.sqrt(np.mean(windows ** 2, axis=1))
    above = ~(rms <= level)  # NaN compares False: loud
    found = np.flatnonzero(above if loud else ~above)
    return None if not found.size else (start + int(found[0])) * size / sample_rate


@dataclass(frozen=True)
class HeardLatency:
    """Signed heard latencies of many turns: median, p10, p90 and how many started before the user ended."""

    n: int
    median_s: float | None
    p10_s: float | None
    p90_s: float | None
    early: int

    @classmethod
    def of(cls, latencies: Sequence[float]) -> HeardLatency:
        values = sorted(float(v) for v in latencies)
        if not values:
            return cls(0, None, None, None, 0)
        return cls(len(values), statistics.median(values), float(np.percentile(values, 10)),
                   float(np.percentile(values, 90)), sum(v < 0 for v in values))

    def cell(self) -> str:
        """``+0.330 s [p10 +0.250, p90 +0.510], 1 early (n=7)``, or ``—``."""
        if self.median_s is None or self.p10_s is None or self.p90_s is None:
            return "—"
        return (f"{self.median_s:+.3f} s [p10 {self.p10_s:+.3f}, p90 {self.p90_s:+.3f}], {self.early} early "
                f"(n={self.n})")

    def to_json(self) -> dict[str, float | int | None]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)
        return {"heard_latency_n": self.n, "heard_latency_median_s": r(self.median_s),
                "heard_latency_p10_s": r(self.p10_s), "heard_latency_p90_s": r(self.p90_s),
                "heard_early_starts": self.early}

