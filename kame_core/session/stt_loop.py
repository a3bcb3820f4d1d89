"""The session's one STT loop: recognition off the frame loop, its events applied in order.

The frame loop hands each user frame to :meth:`STTLoop.feed` and never waits for recognition. The loop task
runs the STT on each frame (in a worker thread in real time, inline on the virtual clock) and applies the
events it returns through ``apply``: at once in real time, and after the STT's modelled latency
(``virtual_latency_s``) on the virtual clock, one batch per frame so events keep their order. The session may
end only when :attr:`STTLoop.done`: the input was flushed and every event it produced has been applied.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from ..clock import Clock
from ..protocols import StreamingSTT, STTEvent


class STTLoop:
    """Runs ``stt`` on the frames fed to it and passes its events to ``apply`` (see the module docstring)."""

    def __init__(self, stt: StreamingSTT, clock: Clock, apply: Callable[[list[STTEvent]], None]) -> None:
        self.stt = stt
        self._clock = clock
        self._apply = apply
        self._queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue()
        self._flushed = False
        self._finished = False
        self._in_flight = 0

    def feed(self, frame: np.ndarray) -> None:
        if not self._flushed:
            self._queue.put_nowait(frame)

    def flush(self) -> None:
        """End of input: finish the open segment now (its final may end the user's turn). Idempotent."""
        if not self._flushed:
            self._flushed = True
            self._queue.put_nowait(None)

    @property
    def done(self) -> bool:
        """The input was flushed, the STT handled it, and every event was applied."""
        return self._finished and self._in_flight == 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = await self._queue.get()
            if frame is None:
                events = await self._clock.compute(self.stt.flush)
            else:
                events = await self._clock.compute(self.stt.accept, frame)
            if events:
                if self._clock.is_virtual:
                    self._in_flight += 1
                    loop.call_later(self.stt.virtual_latency_s, self._apply_late, events)
                else:
                    self._apply(events)
            if frame is None:
                self._finished = True
                return

    def close(self) -> None:
        """The session ended: later events go nowhere. Drops ``apply``, which holds the session that holds this
        loop (a reference cycle that would keep the whole session alive until a full garbage collection)."""
        self._apply = _ignore

    def _apply_late(self, events: list[STTEvent]) -> None:
        self._in_flight -= 1
        self._apply(events)


def _ignore(events: list[STTEvent]) -> None:
    """What a closed loop does with events."""
