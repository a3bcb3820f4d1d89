"""Microphone sessions: KAME live on the real-time clock, fed by streamed microphone chunks -- a thin adapter
around :class:`kame_core.session.LiveSession` (the same live session the live protocol runs).

The browser streams chunks every ~0.5 s; :class:`MicSession` resamples them to 24 kHz (soxr, continuous
across chunks) and pushes them into its live session. The driver starts once ``head_start_s`` of audio is
buffered, so frames arrive before they are due despite chunked delivery (a frame that is still late is read
as silence, as a real-time system must). :meth:`snapshot` gives the trace so far for display; :meth:`finish`
closes the input and returns the finished trace; either way the session's front-end slot is given back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kame_core.audio_io import StreamResampler, to_mono_float32
from kame_core.record.trace import SessionTrace
from kame_core.session import MAX_INPUT_S, LiveSession
from kame_core.stacks.stack import Stack

#: the longest microphone session accepted (as for uploads)
MAX_SECONDS = MAX_INPUT_S


@dataclass
class MicSession:
    """One live KAME session from microphone chunks (one per user; see the module docstring). Building it takes
    a front-end (a neural pool slot: ``PoolFull`` when none is free)."""

    stack: Stack
    sample_rate: int
    head_start_s: float = 1.0
    live: LiveSession = field(init=False)

    def __post_init__(self) -> None:
        self._resampler = StreamResampler(self.sample_rate, 24000)
        self.live = LiveSession(lambda clock: self.stack.runner("kame", clock=clock), head_start_s=self.head_start_s,
                                max_input_s=MAX_SECONDS)

    @property
    def started(self) -> bool:
        return self.live.started

    @property
    def received_s(self) -> float:
        return self.live.received_s

    def push(self, chunk: np.ndarray, sample_rate: int) -> None:
        """Add a microphone chunk (any dtype, mono or multi-channel) at ``sample_rate``."""
        if sample_rate != self.sample_rate:
            raise ValueError(f"the microphone changed rate mid-session ({self.sample_rate} -> {sample_rate} Hz)")
        if self.live.input_full:
            return
        self.live.push(self._resampler.push(to_mono_float32(chunk)))

    def snapshot(self) -> SessionTrace | None:
        """The session so far (None before it started)."""
        return self.live.snapshot()

    def close(self) -> None:
        """Abandon the session (the user left): stop it and give its front-end back, without waiting."""
        self.live.stop()

    def finish(self, timeout_s: float = 60.0) -> SessionTrace:
        """End the input and wait for the session to finish (the front-end may still be answering)."""
        self.live.push(self._resampler.flush())
        trace = self.live.finish(timeout_s)
        if trace is None:
            raise RuntimeError(self.live.error or "the live session produced no trace")
        return trace
