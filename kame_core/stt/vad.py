"""Streaming voice activity detection with the Silero VAD model bundled in faster-whisper.

faster-whisper only exposes Silero for whole files (its recurrent state is reset on every call). Here the
state (LSTM ``h``/``c`` and the 64-sample context) lives in a :class:`StreamingSileroVAD` object, so audio can
arrive 80 ms at a time and every session owns its own state; the ONNX session itself is shared.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VAD_SAMPLE_RATE = 16_000
WINDOW = 512  # samples per Silero window at 16 kHz (32 ms)
CONTEXT = 64


@dataclass(frozen=True)
class VadConfig:
    """Hysteresis thresholds on Silero's speech probability (faster-whisper's defaults)."""

    threshold: float = 0.5
    neg_threshold: float = 0.35
    #: silence that ends a segment
    min_silence_s: float = 0.5
    #: speech shorter than this is dropped as a click (checked when the segment ends)
    min_speech_s: float = 0.15
    #: audio kept before the detected onset and after the last speech window
    pad_s: float = 0.2


class StreamingSileroVAD:
    """Speech probability per 32 ms window, with state carried across calls."""

    def __init__(self) -> None:
        from faster_whisper.vad import get_vad_model

        self._session = get_vad_model().session  # shared, cached by faster-whisper
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context: np.ndarray = np.zeros(CONTEXT, np.float32)
        self._pending: np.ndarray = np.zeros(0, np.float32)

    def push(self, audio16k: np.ndarray) -> np.ndarray:
        """Feed 16 kHz audio; return the probabilities of the windows it completed (maybe none)."""
        buf = np.concatenate([self._pending, np.asarray(audio16k, np.float32)])
        n = len(buf) // WINDOW
        self._pending = buf[n * WINDOW:]
        if n == 0:
            return np.zeros(0, np.float32)
        windows = buf[: n * WINDOW].reshape(n, WINDOW)
        contexts = np.concatenate([self._context[None], windows[:-1, -CONTEXT:]], axis=0)
        self._context = windows[-1, -CONTEXT:].copy()
        batch = np.concatenate([contexts, windows], axis=1)  # Silero treats the batch axis as time
        probs, self._h, self._c = self._session.run(None, {"input": batch, "h": self._h, "c": self._c})
        return np.asarray(probs, np.float32).reshape(-1)
