"""One live conversation, whatever the door: :class:`LiveSession`.

A live session owns its audio source (a :class:`~.sources.LiveSource` with a jitter buffer: the driver starts
once ``head_start_s`` of audio has arrived), its runner on a :class:`~kame_core.clock.RealTimeClock` in a
thread of its own, the front-end the runner holds (a neural pool slot, given back when the session ends,
however it ends), and how it ends: :meth:`stop` (now), :meth:`finish` (after the input drained), errors. The
live protocol (:mod:`kame_core.serve.session`) and the app's microphone are transports around it.

Threads: the transport pushes audio from its own thread (a lock); the runner and its sinks (one
:class:`~.fan_out.FrameFanOut`: the transport's jobs, then the journal) run on the session's thread
(``kame-talk-session``), which gives the front-end back however it ends. The whole model: docs/architecture.md,
"The threads of a live session".
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..clock import SAMPLE_RATE, Clock, RealTimeClock
from ..protocols import FrontEnd
from ..record.trace import SessionTrace
from .disk import error_words
from .driver import SessionDriver
from .fan_out import FrameFanOut, SessionSink
from .sources import LiveSource

log = logging.getLogger("kame.session")

#: the longest live input accepted (seconds of audio); more is not passed on
MAX_INPUT_S = 300.0


def release(front_end: FrontEnd | None) -> None:
    """Give back what a front-end holds: :meth:`FrontEnd.close` (a neural pool slot, the stand-in's threads;
    nothing for a front-end that holds nothing, or for one already given back)."""
    if front_end is not None:
        front_end.close()


def release_front_end(runner: object) -> None:
    """Give back what a runner's front-end holds (see :func:`release`; a cascade has none)."""
    release(getattr(runner, "front_end", None))


class LiveSession:
    """One live conversation (see the module docstring).

    ``make_runner(clock)`` builds the session's runner (it may raise, e.g. ``PoolFull``: then nothing is held).
    ``sinks`` get each frame as it is made, in order, and are told when the driver has ended (normally or not),
    once the front-end is given back; then ``on_end`` is called. All of it on the session's thread.
    """

    def __init__(self, make_runner: Callable[[Clock], SessionDriver], *, head_start_s: float = 0.16,
                 max_input_s: float = MAX_INPUT_S, sinks: Sequence[SessionSink] = (),
                 on_end: Callable[[], object] | None = None) -> None:
        clock = RealTimeClock()
        self.runner = make_runner(clock)
        # a pooled front-end steps every session of its pool at once: frame on the pool's boundaries
        clock.frame_origin = getattr(self.front_end, "frame_origin", None)
        self.head_start_s, self.max_input_s = head_start_s, max_input_s
        #: every frame's jobs (the driver's sink)
        self.sinks = FrameFanOut(sinks)
        self.on_end = on_end
        self.source = LiveSource()
        self.received_s = 0.0
        self.error = ""
        self.trace: SessionTrace | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def front_end(self) -> FrontEnd | None:
        """The runner's front-end (None for a runner without one: the cascade)."""
        front_end: FrontEnd | None = getattr(self.runner, "front_end", None)
        return front_end

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def ended(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    @property
    def input_full(self) -> bool:
        """The input reached ``max_input_s``: more audio is not passed on."""
        return self.received_s >= self.max_input_s

    def push(self, audio: np.ndarray) -> None:
        """Add 24 kHz float32 samples; the driver starts once ``head_start_s`` has arrived. Audio past
        ``max_input_s`` or after the input was closed is dropped."""
        audio = np.asarray(audio, np.float32).reshape(-1)
        if not len(audio) or self.source.closed or self.input_full:
            return
        room = (self.max_input_s - self.received_s) * SAMPLE_RATE
        if room < len(audio):
            audio = audio[: max(0, int(room))]
        self.source.push(audio)
        self.received_s += len(audio) / SAMPLE_RATE
        if self.received_s >= self.head_start_s:
            self._start()

    def snapshot(self) -> SessionTrace | None:
        """The session so far (None before it started)."""
        current = self.source.trace
        return None if current is None else current.snapshot()

    def stop(self) -> None:
        """End now: the input is closed and the driver stops at its next frame (its LLM streams cancelled)."""
        self.source.close()
        self.runner.stop()
        if not self.started:
            release_front_end(self.runner)

    def finish(self, timeout_s: float = 60.0) -> SessionTrace | None:
        """End the input and wait until the session has answered it (a session shorter than the head start runs
        now); the trace, or None when no audio ever came. Raises TimeoutError if the driver does not end."""
        self.source.close()
        if not self.started and self.received_s > 0:
            self._start()
        return self.wait(timeout_s)

    def wait(self, timeout_s: float = 60.0) -> SessionTrace | None:
        """Wait for the driver to end (after :meth:`stop` or :meth:`finish`); the trace, or None when it never
        started. Raises TimeoutError if it does not end in time."""
        thread = self._thread
        if thread is None:
            release_front_end(self.runner)
            return None
        thread.join(timeout_s)
        if thread.is_alive():
            raise TimeoutError(f"the live session did not end within {timeout_s:.0f} s")
        return self.trace

    # -- the driver thread ----------------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="kame-talk-session", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self.trace = self.runner.run_sync(self.source, self.sinks)
        except BaseException as err:  # noqa: BLE001 - reported through ``error`` (and the transport)
            self.error = error_words(err)  # for a client: never a path of the server's machine
            log.error("live session failed: %s: %s", type(err).__name__, err)
        finally:
            try:
                release_front_end(self.runner)  # the pool slot is free again, however the session ended
                self.sinks.on_end()
            finally:
                if self.on_end is not None:
                    self.on_end()
