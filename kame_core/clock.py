"""The frame clock and the two session clocks.

KAME's front-end runs on Moshi's frame clock: 12.5 frames per second, 80 ms each, 1920 samples at 24 kHz.
Everything else (STT, LLM, oracle polls) runs concurrently as asyncio tasks and reads time from a
:class:`Clock`. Two clocks share one interface so the same runner code runs on both:

* :class:`RealTimeClock` -- wall time on an ordinary asyncio loop (live sessions, real-time benchmarks).
* :class:`VirtualClock` -- a deterministic simulated time. ``asyncio.sleep`` advances instantly to the
  next scheduled wake-up, so a 30 s session runs as fast as the CPU allows. Components model their latency
  as virtual durations; real work they must do (a local LLM generating, a network call) is wrapped in
  :meth:`Clock.real_work`, which freezes virtual time until it is done, so results never depend on how
  fast this machine happened to be.
"""
from __future__ import annotations

import asyncio
import contextlib
import selectors
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import TypeVar

SAMPLE_RATE = 24_000
FRAME_RATE = 12.5
FRAME_SECONDS = 1.0 / FRAME_RATE
FRAME_MS = 80
SAMPLES_PER_FRAME = SAMPLE_RATE * FRAME_MS // 1000  # 1920

T = TypeVar("T")


def frame_of(t: float) -> int:
    """Index of the frame that contains time ``t`` (seconds), as KAME computes it: ``int(t * 12.5)``."""
    return int(t * FRAME_RATE + 1e-9)


def frame_start(i: int) -> float:
    """Start time in seconds of frame ``i``."""
    return i * FRAME_SECONDS


class Clock(ABC):
    """Session time in seconds since the session started, plus the way to wait for it."""

    is_virtual: bool = False

    def __init__(self) -> None:
        self._t0: float | None = None

    def now(self) -> float:
        """Seconds since :meth:`run` started the session."""
        loop = asyncio.get_running_loop()
        if self._t0 is None:
            self._t0 = loop.time()
        return loop.time() - self._t0

    async def sleep_until(self, t: float) -> None:
        """Wait until session time ``t`` (returns at once if it has passed)."""
        delay = t - self.now()
        await asyncio.sleep(max(0.0, delay))

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def modelled_latency(self, seconds: float) -> None:  # noqa: B027 - a no-op default, on purpose
        """Wait a component's *modelled* latency: a virtual duration on the virtual clock, nothing in real
        time (where the real work already took real time)."""

    @abstractmethod
    def real_work(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Context for real (non-simulated) work such as network I/O or a thread computing."""

    async def compute(self, fn: Callable[..., T], *args: object) -> T:
        """Run blocking ``fn(*args)``: in a worker thread in real time, inline on the virtual clock."""
        return fn(*args)

    def run(self, main: Callable[[], Coroutine[object, object, T]]) -> T:
        """Run the coroutine built by ``main`` to completion on a fresh loop with this clock's time."""
        loop = self._new_loop()
        try:
            asyncio.set_event_loop(loop)
            self._t0 = self._start_time(loop)
            return loop.run_until_complete(main())
        finally:
            asyncio.set_event_loop(None)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @abstractmethod
    def _new_loop(self) -> asyncio.AbstractEventLoop: ...

    def _start_time(self, loop: asyncio.AbstractEventLoop) -> float:
        """The loop time that is session time 0."""
        return loop.time()


class RealTimeClock(Clock):
    """Wall-clock time on an ordinary asyncio loop.

    ``frame_origin`` (a :func:`time.monotonic` instant, e.g. a session pool's) puts the session's 80 ms frame
    boundaries on that origin's: session time 0 is the latest boundary at or before the start. Sessions of one
    pool then hand their frames in together and share one batched step per frame, however far apart they
    joined. The session starts up to one frame early, which the live head start of buffered audio covers.
    """

    is_virtual = False

    def __init__(self, frame_origin: float | None = None) -> None:
        super().__init__()
        self.frame_origin = frame_origin

    def _start_time(self, loop: asyncio.AbstractEventLoop) -> float:
        start = loop.time()
        if self.frame_origin is None:
            return start
        return start - (time.monotonic() - self.frame_origin) % FRAME_SECONDS

    def _new_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()

    async def compute(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    @contextlib.asynccontextmanager
    async def real_work(self) -> AsyncIterator[None]:
        yield


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that, instead of blocking for ``timeout`` seconds, advances virtual time by it.

    While real work is in flight (see :meth:`VirtualClock.real_work`) it blocks for real, without advancing
    virtual time, so the simulated timeline never depends on how long the real work took.
    """

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None):  # type: ignore[override]
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if self._clock._real_work_in_flight:
            return super().select(0.05 if timeout is None else min(timeout, 0.05))
        if timeout is None:
            raise RuntimeError(
                "virtual clock deadlock: every task waits and nothing is scheduled on the clock"
            )
        self._clock._advance(timeout)
        return []


class VirtualClock(Clock):
    """Deterministic simulated time; see the module docstring."""

    is_virtual = True

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._real_work_in_flight = 0
        self._lock = threading.Lock()

    def _advance(self, seconds: float) -> None:
        self._virtual_now += seconds

    def _new_loop(self) -> asyncio.AbstractEventLoop:
        clock = self

        class _VirtualLoop(asyncio.SelectorEventLoop):
            def time(self) -> float:  # noqa: D401 - asyncio hook
                return clock._virtual_now

        return _VirtualLoop(_VirtualSelector(clock))

    async def modelled_latency(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    @contextlib.asynccontextmanager
    async def real_work(self) -> AsyncIterator[None]:
        with self._lock:
            self._real_work_in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._real_work_in_flight -= 1


async def run_with_real_work(clock: Clock, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` as real work on ``clock`` (virtual time stands still meanwhile)."""
    async with clock.real_work():
        return await awaitable
