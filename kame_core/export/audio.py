"""The run's audio for the annotation tools: one stereo 16-bit WAV, the user left and KAME right."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile as sf

from ..files import write_bytes_atomic
from ..record.trace import SessionTrace


def stereo(trace: SessionTrace) -> np.ndarray:
    """``(samples, 2)`` float32: the user's audio, KAME's output (the shorter one padded with silence)."""
    user, kame = np.asarray(trace.user_audio, np.float32), np.asarray(trace.output_audio, np.float32)
    out = np.zeros((max(len(user), len(kame)), 2), np.float32)
    out[: len(user), 0] = user
    out[: len(kame), 1] = kame
    return np.clip(out, -1.0, 1.0)


def write_wav(trace: SessionTrace, path: str | Path) -> Path:
    """Write the stereo WAV (16-bit PCM at the trace's sample rate) at ``path``."""
    path = Path(path)
    buffer = io.BytesIO()
    sf.write(buffer, stereo(trace), trace.sample_rate, subtype="PCM_16", format="WAV")
    write_bytes_atomic(path, buffer.getvalue())
    return path
