"""Microphone sessions: KAME live on the real-time clock, fed by streamed microphone chunks.

The browser streams chunks every ~0.5 s; :class:`MicSession` resamples them to 24 kHz (soxr, continuous
across chunks), pushes them into a :class:`~kame_core.session.LiveSource` and runs the tandem runner on a
:class:`~kame_core.clock.RealTimeClock` in a background thread. The runner starts once ``head_start_s`` of
audio is buffered, so frames arrive before they are due despite chunked delivery (a frame that is still
late is read as silence, as a real-time system must). :meth:`snapshot` gives the trace so far for display;
:meth:`finish` closes the input and returns the finished trace.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from kame_core.audio_io import StreamResampler, to_mono_float32
from kame_core.clock import SAMPLE_RATE, RealTimeClock
from kame_core.pipelines.stack import Stack, release_front_end
from kame_core.session import LiveSource
from kame_core.trace import SessionTrace

#: the longest microphone session accepted (as for uploads)
MAX_SECONDS = 300.0


@dataclass
class MicSession:
    """One live KAME session from microphone chunks (one per user; see the module docstring)."""

    stack: Stack
    sample_rate: int
    head_start_s: float = 1.0
    source: LiveSource = field(default_factory=LiveSource)
    received_s: float = 0.0
    error: str = ""

    def __post_init__(self) -> None:
        self._resampler = StreamResampler(self.sample_rate, SAMPLE_RATE)
        self._runner = self.stack.runner("kame", clock=RealTimeClock())
        self._thread: threading.Thread | None = None
        self._trace: SessionTrace | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def push(self, chunk: np.ndarray, sample_rate: int) -> None:
        """Add a microphone chunk (any dtype, mono or multi-channel) at ``sample_rate``."""
        if sample_rate != self.sample_rate:
            raise ValueError(f"the microphone changed rate mid-session ({self.sample_rate} -> {sample_rate} Hz)")
        if self.received_s >= MAX_SECONDS:
            return
        audio = self._resampler.push(to_mono_float32(chunk))
        self.received_s += len(audio) / SAMPLE_RATE
        self.source.push(audio)
        if not self.started and self.received_s >= self.head_start_s:
            self._thread = threading.Thread(target=self._run, name="kame-mic-session", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._trace = self._runner.run_sync(self.source)
        except Exception as err:  # noqa: BLE001 - reported to the user by finish()
            self.error = f"{type(err).__name__}: {err}"
        finally:
            release_front_end(self._runner)  # a neural pool slot is free again

    def close(self) -> None:
        """End the input and give back what the session holds (its pool slot), without waiting for it."""
        self.source.close()
        if not self.started:
            release_front_end(self._runner)

    def snapshot(self) -> SessionTrace | None:
        """The session so far (None before it started)."""
        current = self.source.trace
        return None if current is None else current.snapshot()

    def finish(self, timeout_s: float = 60.0) -> SessionTrace:
        """End the input and wait for the session to finish (the front-end may still be answering)."""
        self.source.push(self._resampler.flush())
        if not self.started:  # shorter than the head start: run it now, still on the real-time clock
            self._thread = threading.Thread(target=self._run, name="kame-mic-session", daemon=True)
            self._thread.start()
        self.source.close()
        assert self._thread is not None
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the live session did not end within {timeout_s:.0f} s of the input")
        if self._trace is None:
            raise RuntimeError(self.error or "the live session produced no trace")
        return self._trace
