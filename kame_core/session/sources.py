"""Where a session's user audio comes from, frame by frame.

* :class:`ArraySource` -- a recorded 24 kHz signal (uploads, scenarios, tests, benchmarks).
* :class:`LiveSource` -- frames pushed as they arrive (a microphone, a websocket client); an under-run reads
  as silence, as a real-time system must, and the input ends only when :meth:`LiveSource.close` is called,
  so it may never end.

A source may also define ``follow(trace)`` to watch the session it feeds (see :func:`follow_session`).
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

import numpy as np

from ..clock import SAMPLES_PER_FRAME
from ..record.trace import SessionTrace, iter_frames, silence


class UserAudioSource(Protocol):
    """``read_frame(i)`` -> the 1920 samples of frame ``i``, or None once the input ended."""

    def read_frame(self, index: int) -> np.ndarray | None: ...


def follow_session(source: object, trace: SessionTrace) -> None:
    """Hand ``trace`` (being built) to a source that wants to follow the session it feeds.

    A source may define ``follow(trace)``; the driver calls it once before the first frame. Such a source can
    decide what to play next from what was said so far -- e.g. a simulated user who asks the follow-up
    question only after the answer ended (:class:`kame_core.eval.sessions.TurnTakingSource`). It must only
    read the trace.
    """
    follow = getattr(source, "follow", None)
    if callable(follow):
        follow(trace)


class ArraySource:
    """Replays a recorded 24 kHz user signal frame by frame."""

    def __init__(self, audio: np.ndarray) -> None:
        self._frames = iter_frames(np.asarray(audio, np.float32))

    def read_frame(self, index: int) -> np.ndarray | None:
        return self._frames[index] if index < len(self._frames) else None


class LiveSource:
    """Frames pushed as they arrive; silence is read on an under-run; the input ends when closed and drained.

    ``push`` and ``read_frame`` may be called from different threads; frames are read once, in order (a
    frame read is dropped here: the session's trace keeps it). ``trace`` is the session being built from it
    (handed over by the driver; for a live display to snapshot).
    """

    def __init__(self) -> None:
        self._frames: deque[np.ndarray] = deque()
        self._read = 0  # index of the frame at the head of ``_frames``
        self._pushed = 0
        self._buffer: np.ndarray = np.zeros(0, np.float32)
        self._lock = threading.Lock()
        self.closed = False
        self.underruns = 0
        self.trace: SessionTrace | None = None

    def follow(self, trace: SessionTrace) -> None:
        self.trace = trace

    def push(self, audio: np.ndarray) -> None:
        """Append 24 kHz float32 samples (any length)."""
        with self._lock:
            self._buffer = np.concatenate([self._buffer, np.asarray(audio, np.float32).reshape(-1)])
            n = len(self._buffer) // SAMPLES_PER_FRAME
            for k in range(n):
                self._frames.append(self._buffer[k * SAMPLES_PER_FRAME:(k + 1) * SAMPLES_PER_FRAME].copy())
            self._pushed += n
            self._buffer = self._buffer[n * SAMPLES_PER_FRAME:]

    @property
    def received_frames(self) -> int:
        """Complete frames pushed so far."""
        return self._pushed

    @property
    def buffered_frames(self) -> int:
        """Frames pushed but not read yet."""
        return len(self._frames)

    def close(self) -> None:
        """End the input: once the frames pushed so far are read, ``read_frame`` returns None."""
        with self._lock:
            if len(self._buffer):  # the last partial frame, zero-padded
                frame = silence()
                frame[: len(self._buffer)] = self._buffer
                self._frames.append(frame)
                self._pushed += 1
                self._buffer = np.zeros(0, np.float32)
            self.closed = True

    def read_frame(self, index: int) -> np.ndarray | None:
        with self._lock:
            if self.closed and not self._frames:
                return None  # ended: every later frame too
            if index != self._read:
                raise ValueError(f"LiveSource frames are read in order: asked for {index}, next is {self._read}")
            if self._frames:
                self._read += 1
                return self._frames.popleft()
            self._read += 1  # the frame's time passed with no audio: it is silence for good
            self.underruns += 1
            return silence()
