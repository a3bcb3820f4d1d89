"""A spectrogram of a run's audio as an image the timeline stretches over its lane (Praat's view: time across,
frequency up, dark = loud).

Short-time Fourier transform with a 25 ms Gaussian-like (Hann) window, as Praat's default "wide-band" view, up to
:data:`MAX_HZ`; the hop grows with the recording so the image stays under :data:`MAX_COLUMNS` columns (10 ms up to
30 s of audio, 40 ms for two minutes). Levels in dB under the loudest bin, :data:`DYNAMIC_RANGE_DB` shown, on a
grey scale (white = silent); encoded as a greyscale JPEG so a two-minute lane costs tens of kilobytes.
"""
from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np

MAX_HZ = 8000.0
WINDOW_S = 0.025
MIN_HOP_S = 0.01
MAX_COLUMNS = 3000
ROWS = 96
DYNAMIC_RANGE_DB = 60.0


@dataclass(frozen=True)
class Spectrogram:
    """Levels (rows = frequency bins from 0 Hz up, columns = time steps) in dB under the loudest bin, clipped at
    ``-DYNAMIC_RANGE_DB``; column ``k`` is centred at ``(k + 0.5) * hop_s``."""

    levels_db: np.ndarray
    hop_s: float
    max_hz: float

    @property
    def duration(self) -> float:
        return self.levels_db.shape[1] * self.hop_s

    def data_uri(self, quality: int = 80) -> str:
        """The image as a ``data:image/jpeg`` URI: low frequencies at the bottom, dark = loud."""
        from PIL import Image

        grey = np.clip(255.0 * (-self.levels_db / DYNAMIC_RANGE_DB), 0, 255).astype(np.uint8)[::-1]
        out = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(grey), mode="L").save(out, format="JPEG", quality=quality)
        return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def spectrogram(audio: np.ndarray, sample_rate: int, *, max_columns: int = MAX_COLUMNS, rows: int = ROWS,
                max_hz: float = MAX_HZ) -> Spectrogram | None:
    """The spectrogram of ``audio`` (mono float), or None when there is less than one window of it."""
    audio = np.nan_to_num(np.asarray(audio, np.float32).reshape(-1))
    window = int(round(WINDOW_S * sample_rate))
    if sample_rate <= 0 or len(audio) < window:
        return None
    hop = max(int(round(MIN_HOP_S * sample_rate)), -(-len(audio) // max_columns))
    columns = 1 + (len(audio) - window) // hop
    starts = np.arange(columns) * hop
    frames = audio[starts[:, None] + np.arange(window)[None, :]] * np.hanning(window).astype(np.float32)
    n_fft = 1 << (window - 1).bit_length()
    power = np.abs(np.fft.rfft(frames, n=n_fft, axis=1)) ** 2            # (columns, bins)
    hz = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    top = min(max_hz, sample_rate / 2)
    edges = np.linspace(0.0, top, rows + 1)
    which = np.clip(np.searchsorted(edges, hz[hz < top], side="right") - 1, 0, rows - 1)
    onehot = np.zeros((len(which), rows), np.float64)  # bin k of the FFT -> row which[k]
    onehot[np.arange(len(which)), which] = 1.0
    binned = power[:, : len(which)] @ onehot
    counts = np.maximum(onehot.sum(axis=0), 1.0)
    db = 10.0 * np.log10(binned / counts + 1e-12)
    db -= db.max()
    return Spectrogram(np.maximum(db, -DYNAMIC_RANGE_DB).T.astype(np.float32), hop / sample_rate, top)
