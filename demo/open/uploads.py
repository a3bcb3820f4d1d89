"""User audio uploads: any common format and sample rate in, 24 kHz float32 mono out, or a clear refusal.

Decoding tries libsndfile (WAV, FLAC, OGG/Vorbis/Opus, MP3, AIFF ...) first and PyAV (bundled FFmpeg
libraries: M4A/AAC, WebM, MP4 audio ...) second; stereo is downmixed and the rate converted with soxr.
Empty, silent, corrupt and over-long (> 5 minutes) inputs raise :class:`UploadError` with one sentence
that says what is wrong with *this* file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from kame_core.audio_io import resample, to_mono_float32
from kame_core.clock import SAMPLE_RATE

MAX_SECONDS = 300.0
SUPPORTED = "WAV, FLAC, OGG/Opus, MP3, AIFF, M4A/AAC, WebM"


class UploadError(ValueError):
    """An uploaded audio file cannot be used; the message says why, naming the file."""


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _too_long(name: str, seconds: float) -> UploadError:
    return UploadError(f"'{name}' is {_minutes(seconds)} long; the limit is 5 minutes ({MAX_SECONDS:.0f} s). "
                       "Trim it and upload again.")


def _decode_soundfile(path: Path) -> tuple[np.ndarray, int]:
    info = sf.info(str(path))
    if info.frames > 0 and info.samplerate > 0 and info.frames / info.samplerate > MAX_SECONDS:
        raise _too_long(path.name, info.frames / info.samplerate)
    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return audio, int(sr)


def _decode_av(path: Path) -> tuple[np.ndarray, int]:
    import av

    with av.open(str(path)) as container:
        streams = [s for s in container.streams if s.type == "audio"]
        if not streams:
            raise UploadError(f"'{path.name}' has no audio track")
        stream = streams[0]
        if stream.duration is not None and stream.time_base is not None \
                and float(stream.duration * stream.time_base) > MAX_SECONDS:
            raise _too_long(path.name, float(stream.duration * stream.time_base))
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        chunks, total = [], 0
        for frame in container.decode(stream):
            for out in resampler.resample(frame):  # type: ignore[arg-type]  # an audio stream decodes AudioFrames
                chunk = out.to_ndarray().reshape(-1)
                chunks.append(chunk)
                total += len(chunk)
                if total > (MAX_SECONDS + 1) * SAMPLE_RATE:
                    raise _too_long(path.name, total / SAMPLE_RATE)
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    return audio[:, None].astype(np.float32), SAMPLE_RATE


def decode_upload(path: str | Path | None) -> np.ndarray:
    """Decode an uploaded audio file to 24 kHz float32 mono (see the module docstring for refusals)."""
    if path is None or str(path) == "":
        raise UploadError("No audio file given: upload a recording (" + SUPPORTED + ").")
    path = Path(path)
    if not path.is_file():
        raise UploadError(f"'{path.name}' could not be read (the upload did not arrive).")
    if path.stat().st_size == 0:
        raise UploadError(f"'{path.name}' is empty (0 bytes).")
    try:
        audio, sr = _decode_soundfile(path)
    except UploadError:
        raise
    except Exception:  # noqa: BLE001 - libsndfile refused it: try the FFmpeg libraries
        try:
            audio, sr = _decode_av(path)
        except UploadError:
            raise
        except Exception:  # noqa: BLE001
            raise UploadError(f"'{path.name}' is not a readable audio file (corrupt, or not one of: "
                              f"{SUPPORTED}).") from None
    mono = to_mono_float32(audio)
    if mono.size == 0:
        raise UploadError(f"'{path.name}' contains no audio samples.")
    if not np.all(np.isfinite(mono)):
        raise UploadError(f"'{path.name}' is corrupt: it decodes to non-finite samples.")
    if len(mono) / sr > MAX_SECONDS:
        raise _too_long(path.name, len(mono) / sr)
    if float(np.max(np.abs(mono))) < 1e-4:
        raise UploadError(f"'{path.name}' is silent: there is no speech to answer.")
    return resample(mono, sr, SAMPLE_RATE)
