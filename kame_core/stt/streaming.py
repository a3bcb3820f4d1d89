"""Streaming speech recognition: Silero VAD segments the user's speech, Whisper transcribes each segment.

Per segment the events are, in order: ``speech_start`` (once the onset is confirmed), ``partial`` at most
``partial_interval_s`` of audio apart while the segment is open (the whole segment so far, re-decoded; short
pauses included), then -- after ``min_silence_s`` of silence -- ``final`` (text and word timestamps) followed
by ``speech_end``. All times
are session times of the audio, counted from the first frame fed after :meth:`reset`.

Partials are emitted on schedule even when their text did not change, so a consumer can rely on the cadence.
A partial whose short-window decode loops is cut where the loop starts instead of being re-decoded on the full
30 s window (~1 s here, which would make it late); finals still get the full-window retry.
A segment longer than ``max_segment_s`` is closed and a new one opened at once (Whisper's window is 30 s).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..audio_io import StreamResampler
from ..clock import SAMPLE_RATE
from ..paths import ModelFiles
from ..protocols import STTEvent, Word
from ..record.trace import Provenance
from .models import load_whisper, resolve_whisper_model
from .shared import SharedWhisper, SharedWhisperClient
from .vad import VAD_SAMPLE_RATE, WINDOW, StreamingSileroVAD, VadConfig
from .whisper_decode import ShortWhisper

SR = VAD_SAMPLE_RATE


class _AudioBuffer:
    """Recent 16 kHz audio addressed by absolute sample index (sample ``n`` is at session time n / SR)."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self.start = 0  # absolute index of the first sample held
        self.end = 0  # absolute index one past the last sample held

    def append(self, audio: np.ndarray) -> None:
        self._chunks.append(audio)
        self.end += len(audio)

    def slice(self, n0: int, n1: int) -> np.ndarray:
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        self._chunks = [audio]
        return audio[max(0, n0 - self.start): max(0, n1 - self.start)]

    def drop_before(self, n: int) -> None:
        """Forget audio before sample ``n`` (whole chunks only: cheap, called every frame)."""
        while len(self._chunks) > 1 and self.start + len(self._chunks[0]) <= n:
            self.start += len(self._chunks.pop(0))


@dataclass
class _Segment:
    """VAD bookkeeping of the open speech segment, in absolute 16 kHz sample indices."""

    onset: int
    audio_start: int  # ``pad_s`` before the onset: decoding starts here
    last_speech_end: int
    confirmed: bool = False
    silence_since: int | None = None
    last_partial: int = 0


class WhisperStreamingSTT:
    """:class:`~kame_core.protocols.StreamingSTT` over faster-whisper (English) and Silero VAD.

    ``virtual_latency_s`` defaults to a typical decode of a 2-4 s buffer on 2 CPU cores (~0.2 s). ``files``:
    where the model comes from without ``model_path`` (:func:`~.models.resolve_whisper_model`). ``shared``: decode
    through the process's batched worker (:class:`~.shared.SharedWhisper`, its model) instead of alone.
    """

    def __init__(self, model_path: str | None = None, *, language: str = "en",
                 partial_interval_s: float = 0.3, vad: VadConfig = VadConfig(), max_segment_s: float = 20.0,
                 final_beam_size: int = 1, virtual_latency_s: float = 0.2, compute_type: str = "int8",
                 cpu_threads: int | None = None, files: ModelFiles | None = None,
                 shared: SharedWhisper | None = None) -> None:
        self.decoder: ShortWhisper | SharedWhisperClient
        if shared is not None:
            model_dir = shared.model_dir
            self.decoder = shared.client()
        else:
            model_dir = resolve_whisper_model(model_path, files)
            threads = cpu_threads if cpu_threads is not None else min(4, os.cpu_count() or 1)
            self.decoder = ShortWhisper(load_whisper(model_dir, compute_type, threads), language=language)
        self.partial_interval_s = partial_interval_s
        self.vad_config = vad
        self.max_segment_s = max_segment_s
        self.final_beam_size = final_beam_size
        self.virtual_latency_s = virtual_latency_s
        self.provenance = Provenance(
            kind="stt", model_id=f"whisper-{os.path.basename(os.path.normpath(model_dir))}",
            version=f"faster-whisper {_version('faster-whisper')}",
            label="faster-whisper (short-window encode) + Silero VAD, streaming"
                  + (f"; batched across sessions on {shared.device}" if shared is not None else ""),
        )
        self._vad = StreamingSileroVAD()
        self.reset()

    # -- protocol -------------------------------------------------------------------------------------
    def reset(self) -> None:
        self._resampler = StreamResampler(SAMPLE_RATE, SR)
        self._vad.reset()
        self._audio = _AudioBuffer()
        self._vad_n = 0  # absolute index of the next VAD window
        self._max_chunk = 0
        self._segment: _Segment | None = None

    def accept(self, frame: np.ndarray) -> list[STTEvent]:
        return self._consume(self._resampler.push(frame))

    def flush(self) -> list[STTEvent]:
        events = self._consume(self._resampler.flush())
        seg, self._segment = self._segment, None
        if seg is not None and seg.confirmed:
            end = seg.last_speech_end if seg.silence_since is not None else self._audio.end
            events += self._close(seg, end)
        return events

    def close(self) -> None:
        """The session is over: a shared decoder drops what this session still has queued."""
        if isinstance(self.decoder, SharedWhisperClient):
            self.decoder.close()

    # -- internals ------------------------------------------------------------------------------------
    def _consume(self, audio16k: np.ndarray) -> list[STTEvent]:
        if len(audio16k) == 0:
            return []
        self._audio.append(audio16k)
        events: list[STTEvent] = []
        for p in self._vad.push(audio16k):
            events += self._on_window(float(p), self._vad_n)
            self._vad_n += WINDOW
        seg = self._segment
        keep_from = seg.audio_start if seg else self._vad_n - int((self.vad_config.pad_s + 0.1) * SR)
        self._audio.drop_before(keep_from)
        # VAD time advances in whole 32 ms windows, by up to this much per chunk (soxr's chunks vary in size):
        # emit now if waiting for the next chunk could overshoot the interval.
        self._max_chunk = max(self._max_chunk, len(audio16k))
        next_step = (WINDOW - 1 + self._max_chunk) // WINDOW * WINDOW
        if (seg is not None and seg.confirmed
                and self._vad_n + next_step > seg.last_partial + self.partial_interval_s * SR):
            seg.last_partial = self._vad_n
            text = self.decoder.transcribe(self._audio.slice(seg.audio_start, self._vad_n), retry_looped=False).text
            events.append(STTEvent("partial", text=text, start=seg.onset / SR, end=self._vad_n / SR))
        return events

    def _on_window(self, p: float, n: int) -> list[STTEvent]:
        """Advance the VAD state machine by one window starting at sample ``n``."""
        cfg = self.vad_config
        seg = self._segment
        if seg is None:
            if p >= cfg.threshold:
                self._segment = self._open(onset=n)
            return []
        if p >= cfg.threshold:
            seg.last_speech_end = n + WINDOW
            seg.silence_since = None
        elif p < cfg.neg_threshold and seg.silence_since is None:
            seg.silence_since = n
        if not seg.confirmed:
            if seg.silence_since is not None:  # a click, not speech: forget it
                self._segment = None
            elif seg.last_speech_end - seg.onset >= cfg.min_speech_s * SR:
                seg.confirmed = True
                return [STTEvent("speech_start", start=seg.onset / SR)]
            return []
        if seg.silence_since is not None and n + WINDOW - seg.silence_since >= cfg.min_silence_s * SR:
            self._segment = None
            return self._close(seg, seg.last_speech_end)
        if n + WINDOW - seg.audio_start >= self.max_segment_s * SR:
            split = n + WINDOW
            self._segment = self._open(onset=split, confirmed=True)
            return [*self._close(seg, split), STTEvent("speech_start", start=split / SR)]
        return []

    def _open(self, onset: int, confirmed: bool = False) -> _Segment:
        start = max(self._audio.start, onset - int(self.vad_config.pad_s * SR))
        return _Segment(onset=onset, audio_start=start, last_speech_end=onset, confirmed=confirmed,
                        last_partial=onset)

    def _close(self, seg: _Segment, end: int) -> list[STTEvent]:
        """Final transcript with word timestamps (session times), then ``speech_end``."""
        stop = min(end + int(self.vad_config.pad_s * SR), self._audio.end)
        result = self.decoder.transcribe(self._audio.slice(seg.audio_start, stop), words=True,
                                         beam_size=self.final_beam_size)
        t0 = seg.audio_start / SR
        words = tuple(Word(w.text, round(t0 + w.start, 3), round(t0 + w.end, 3)) for w in result.words)
        return [STTEvent("final", text=result.text, words=words, start=seg.onset / SR, end=end / SR),
                STTEvent("speech_end", start=seg.onset / SR, end=end / SR)]


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"
