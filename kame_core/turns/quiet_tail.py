"""How long the user's audio has been quiet, by its level alone: the first sign that they may have stopped.

Silero VAD's probability lags the sound: it falls below its end threshold 50-100 ms after the last word's energy,
and a floor hears that only at the end of the 80 ms frame it falls in, so the VAD's end comes 0.07-0.17 s after
the speech. The level drops at once. :class:`QuietTail` follows the user's frames in 10 ms windows against a peak
that decays slowly (the speaker's own loudness: a quiet microphone and a loud one are read alike) and says how
long the audio has been at least :data:`QUIET_DB` below it. A stop consonant's closure is quiet too, so this is a
*candidate* end: a floor may start work on it (Smart Turn's score, :mod:`.floor_policies.smart_turn`) and keep
that work only if the VAD then confirms the end with no loud window in between.
"""
from __future__ import annotations

import numpy as np

#: the analysis window (seconds)
WINDOW_S = 0.01
#: quiet: this many dB below the decaying peak
QUIET_DB = 30.0
#: the peak falls this many dB a second (a phrase's loudness is remembered for a few seconds)
PEAK_DECAY_DB_PER_S = 6.0
#: below this RMS nothing counts as speech: before anyone spoke, nothing is a quiet tail (-60 dBFS)
FLOOR_RMS = 1e-3


class QuietTail:
    """The trailing quiet of one user's audio (one instance per session; frames of any length at ``rate``)."""

    def __init__(self, rate: int) -> None:
        if rate <= 0:
            raise ValueError(f"QuietTail: sample rate {rate} must be positive")
        self._size = max(1, int(round(WINDOW_S * rate)))
        self._decay = 10.0 ** (-PEAK_DECAY_DB_PER_S * WINDOW_S / 20.0)
        self._ratio = 10.0 ** (-QUIET_DB / 20.0)
        self._pending: np.ndarray = np.zeros(0, np.float32)
        self._peak = 0.0
        self._quiet_windows = 0

    @property
    def quiet_s(self) -> float:
        """Seconds of quiet at the end of the audio heard so far (0 when its last window is loud, or before any
        window above the floor was heard)."""
        return self._quiet_windows * WINDOW_S

    def hear(self, audio: np.ndarray) -> None:
        """Feed the next samples (non-finite samples count as loud)."""
        samples = np.concatenate([self._pending, np.asarray(audio, np.float32).reshape(-1)])
        n = len(samples) // self._size
        self._pending = samples[n * self._size:]
        if n == 0:
            return
        with np.errstate(invalid="ignore", over="ignore"):
            rms = np.sqrt(np.mean(samples[:n * self._size].astype(np.float64).reshape(n, self._size) ** 2, axis=1))
        for level in rms:
            loud = not level <= self._peak * self._ratio  # NaN: loud
            self._peak = max(self._peak * self._decay, float(level) if np.isfinite(level) else self._peak)
            if loud or self._peak < FLOOR_RMS:
                self._quiet_windows = 0
            else:
                self._quiet_windows += 1
