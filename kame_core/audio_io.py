"""Audio helpers shared by the STT and TTS back-ends: resampling (soxr) and decoding (soundfile).

Everything here speaks float32 mono in [-1, 1]. One-shot :func:`resample` is for whole utterances (TTS
output); :class:`StreamResampler` is for audio that arrives frame by frame (STT input), where resampling each
frame on its own would click at every frame edge.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from .clock import SAMPLE_RATE


def to_mono_float32(audio: np.ndarray) -> np.ndarray:
    """Float32 mono: integer PCM is scaled to [-1, 1], channels are averaged."""
    audio = np.asarray(audio)
    if np.issubdtype(audio.dtype, np.integer):
        audio = audio.astype(np.float32) / float(np.iinfo(audio.dtype).max)
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    return np.ascontiguousarray(audio, dtype=np.float32)


def resample(audio: np.ndarray, sr_in: int, sr_out: int = SAMPLE_RATE) -> np.ndarray:
    """Resample a whole mono signal (soxr, high quality)."""
    audio = to_mono_float32(audio)
    if sr_in == sr_out or len(audio) == 0:
        return audio
    return soxr.resample(audio, sr_in, sr_out, quality="HQ").astype(np.float32, copy=False)


class StreamResampler:
    """Resamples a stream chunk by chunk with no discontinuity at chunk edges.

    soxr holds back a few milliseconds of filter delay: the output of a chunk can be slightly shorter than
    ``len(chunk) * sr_out / sr_in``; :meth:`flush` returns the rest at the end of the stream.
    """

    def __init__(self, sr_in: int, sr_out: int) -> None:
        self.sr_in = sr_in
        self.sr_out = sr_out
        self._stream = soxr.ResampleStream(sr_in, sr_out, 1, dtype="float32", quality="HQ")

    def push(self, chunk: np.ndarray) -> np.ndarray:
        return self._stream.resample_chunk(to_mono_float32(chunk), last=False)

    def flush(self) -> np.ndarray:
        return self._stream.resample_chunk(np.zeros(0, np.float32), last=True)


def decode_audio(source: str | Path | bytes, sr_out: int = SAMPLE_RATE) -> np.ndarray:
    """Decode a WAV/FLAC/OGG file (path or bytes) to float32 mono at ``sr_out``."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
    audio, sr = sf.read(handle, dtype="float32", always_2d=False)
    return resample(audio, int(sr), sr_out)
