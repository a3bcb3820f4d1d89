"""The frame clock and the two session clocks."""
from __future__ import annotations

import asyncio
import math
import time

import pytest

from kame_core.clock import (
    FRAME_SECONDS,
    SAMPLES_PER_FRAME,
    RealTimeClock,
    VirtualClock,
    frame_of,
    frame_start,
    run_with_real_work,
)


def test_frame_constants():
    assert FRAME_SECONDS == 0.08 and SAMPLES_PER_FRAME == 1920
    assert frame_of(0.0) == 0 and frame_of(0.08) == 1 and frame_of(2.8) == 35 and frame_of(0.0799) == 0
    assert frame_start(25) == pytest.approx(2.0)


def test_virtual_time_runs_faster_than_real_time_and_is_exact():
    clock = VirtualClock()

    async def main():
        seen = []
        for i in range(1, 101):
            await clock.sleep_until(i * 10.0)
            seen.append(clock.now())
        return seen

    t0 = time.perf_counter()
    seen = clock.run(main)
    assert time.perf_counter() - t0 < 1.0
    assert seen == pytest.approx([i * 10.0 for i in range(1, 101)], abs=1e-9)


def test_virtual_tasks_interleave_in_time_order():
    clock = VirtualClock()
    log = []

    async def ticker(name, period, n):
        for _ in range(n):
            await clock.sleep(period)
            log.append((round(clock.now(), 6), name))

    async def main():
        await asyncio.gather(ticker("frame", 0.08, 10), ticker("poll", 0.5, 1))

    clock.run(main)
    assert log.index((0.5, "poll")) == 6  # after frames at 0.08 .. 0.48


def test_real_work_freezes_virtual_time():
    clock = VirtualClock()

    async def main():
        before = clock.now()
        await run_with_real_work(clock, asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.2))
        return clock.now() - before

    assert clock.run(main) == 0.0


def test_modelled_latency_is_virtual_only():
    async def main(clock):
        before = clock.now()
        await clock.modelled_latency(5.0)
        return clock.now() - before

    v = VirtualClock()
    assert v.run(lambda: main(v)) == pytest.approx(5.0)
    r = RealTimeClock()
    assert r.run(lambda: main(r)) < 0.5


def test_virtual_deadlock_is_reported_not_hung():
    clock = VirtualClock()

    async def main():
        await asyncio.Event().wait()

    with pytest.raises(RuntimeError, match="virtual clock deadlock"):
        clock.run(main)


def test_real_time_clock_tracks_wall_time():
    clock = RealTimeClock()

    async def main():
        await clock.sleep_until(0.2)
        return clock.now()

    assert 0.19 <= clock.run(main) < 0.5


def test_a_frame_origin_puts_session_time_zero_on_its_frame_boundaries():
    """Two sessions started 37 ms apart on one origin share their frame boundaries (a pool steps them at once)."""
    origin = time.monotonic() - 1.234

    def start_instant() -> tuple[float, float]:
        clock = RealTimeClock(frame_origin=origin)

        async def main():
            return time.monotonic() - clock.now(), clock.now()

        return clock.run(main)

    began = time.monotonic()
    first_zero, first_now = start_instant()
    time.sleep(0.037)
    second_zero, second_now = start_instant()
    took = time.monotonic() - began
    for zero, now in ((first_zero, first_now), (second_zero, second_now)):
        frames = (zero - origin) / FRAME_SECONDS
        assert abs(frames - round(frames)) < 0.02  # a boundary of the origin's (within 1.6 ms)
        assert 0.0 <= now < FRAME_SECONDS + 0.01  # started at most one frame early
    # the second session starts on the same boundary or a later one, never further on than the time that passed
    # between the two starts (37 ms unless the machine held this process back: once 160 ms, at idle priority)
    assert 0 <= round((second_zero - first_zero) / FRAME_SECONDS) <= math.ceil(took / FRAME_SECONDS)
