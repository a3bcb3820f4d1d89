"""Pitch (F0) and intensity of a run's audio, computed by Praat itself (``praat-parselmouth``) with Praat's default
settings, so a value read at a time here is the value Praat gives on the same sound.

* pitch: ``To Pitch`` (the autocorrelation method), time step 0 (= auto: 0.75 / pitch floor, 10 ms), pitch floor
  75 Hz, ceiling 600 Hz; a value at a time is Praat's ``Get value at time`` (linear, Hertz): ``None`` where
  Praat finds the sound unvoiced;
* intensity: ``To Intensity``, minimum pitch 100 Hz, time step 0 (= auto: 8 ms), mean subtracted; a value at a time
  is Praat's ``Get value`` (cubic) in dB. Praat reads samples as pascals (dB re 20 µPa) and gives digital silence as
  -300 dB.

:class:`AcousticsKept` keeps the analysis of each audio array its owner (one opened file) asked for: two minutes of
pitch take about half a second, and every redraw of the lanes asks again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kept import Kept

#: Praat's own view ranges for these objects (the pitch floor and ceiling; its intensity editor's 50-100 dB)
INTENSITY_VIEW_DB = (50.0, 100.0)
#: at or under this, Praat's intensity is digital silence (it gives -300 dB for all-zero samples)
SILENCE_DB = -299.0
#: analyses an owner keeps (two channels of a few runs)
KEPT = 8


@dataclass(frozen=True)
class PraatSettings:
    """The analysis settings, Praat's defaults unless given."""

    pitch_floor_hz: float = 75.0
    pitch_ceiling_hz: float = 600.0
    intensity_minimum_pitch_hz: float = 100.0

    def describe(self) -> str:
        """The settings as a reader checks them against Praat's dialogs."""
        return (f"Praat To Pitch (ac): floor {self.pitch_floor_hz:g} Hz, ceiling {self.pitch_ceiling_hz:g} Hz, "
                f"time step auto; To Intensity: minimum pitch {self.intensity_minimum_pitch_hz:g} Hz, time step "
                "auto, mean subtracted")


PRAAT_DEFAULTS = PraatSettings()


@dataclass(frozen=True)
class Track:
    """One analysis as a curve: frame times (s) and values (Hz with NaN where unvoiced, or dB)."""

    times: np.ndarray
    values: np.ndarray
    unit: str


@dataclass(frozen=True)
class Acoustics:
    """Praat's Pitch and Intensity objects of one sound, and the settings they were made with."""

    pitch: Any  # parselmouth.Pitch
    intensity: Any  # parselmouth.Intensity
    settings: PraatSettings
    praat_version: str

    def pitch_at(self, t: float) -> float | None:
        """Praat's pitch at ``t`` s (Hz; linear), None where unvoiced or outside the sound."""
        value = float(self.pitch.get_value_at_time(float(t)))
        return None if math.isnan(value) else value

    def intensity_at(self, t: float) -> float | None:
        """Praat's intensity at ``t`` s (dB; cubic), None outside the sound."""
        value = float(self.intensity.get_value(float(t)))
        return None if math.isnan(value) else value

    def pitch_track(self) -> Track:
        values = np.asarray(self.pitch.selected_array["frequency"], np.float64).copy()
        values[values <= 0] = np.nan  # Praat's 0: unvoiced
        return Track(np.asarray(self.pitch.xs(), np.float64), values, "Hz")

    def intensity_track(self) -> Track:
        return Track(np.asarray(self.intensity.xs(), np.float64),
                     np.asarray(self.intensity.values, np.float64).reshape(-1), "dB")


class AcousticsUnavailable(RuntimeError):
    """praat-parselmouth is not installed."""


def praat_acoustics(audio: np.ndarray, sample_rate: int,
                    settings: PraatSettings = PRAAT_DEFAULTS) -> Acoustics | None:
    """Pitch and intensity of ``audio`` (mono) by Praat; None when Praat cannot analyse it (shorter than its
    windows: about 64 ms)."""
    try:
        import parselmouth
    except ImportError as exc:
        raise AcousticsUnavailable("pitch and intensity need praat-parselmouth: pip install praat-parselmouth") \
            from exc
    samples = np.nan_to_num(np.asarray(audio, np.float64).reshape(-1), nan=0.0, posinf=0.0, neginf=0.0)
    if sample_rate <= 0 or samples.size == 0:
        return None
    sound = parselmouth.Sound(samples, sampling_frequency=float(sample_rate))
    try:
        pitch = sound.to_pitch(pitch_floor=settings.pitch_floor_hz, pitch_ceiling=settings.pitch_ceiling_hz)
        intensity = sound.to_intensity(minimum_pitch=settings.intensity_minimum_pitch_hz)
    except parselmouth.PraatError:  # too short for its windows
        return None
    return Acoustics(pitch, intensity, settings, str(parselmouth.PRAAT_VERSION))


class AcousticsKept:
    """The analyses its owner asked for, by audio array (the very array: a new recording is analysed anew)."""

    def __init__(self) -> None:
        self._kept: Kept[tuple[int, int, int], tuple[np.ndarray, Acoustics | None]] = Kept()

    def of(self, audio: np.ndarray, sample_rate: int) -> Acoustics | None:
        key = (id(audio), int(audio.size), int(sample_rate))
        entry = self._kept.get(key)
        if entry is not None and entry[0] is audio:
            return entry[1]
        made = praat_acoustics(audio, sample_rate)
        self._kept.put(key, (audio, made), KEPT)
        return made
