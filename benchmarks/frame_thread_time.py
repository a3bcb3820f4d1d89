"""How long a live frame holds the real-time thread: the CPU time the session's event-loop thread spends per
80 ms frame period, on the offline CPU stack in real time, with the live server's frame sink attached.

A live session runs its frame loop, its STT events, the oracle manager's bookkeeping and the frame sink (the
wire messages, the Timeline's turn latencies and hint levels) on one event-loop thread; the models (Whisper,
the front-end, SmolLM2, Piper) run in worker threads. Whatever the loop thread does per frame delays the next
frame. Measured with :func:`time.thread_time` (CPU time of that thread alone, so other processes on the cores
inflate it less than wall time):

* **loop thread per frame**: its CPU time between one frame's wake-up and the next -- everything it did for
  that frame period (median, p99, max);
* **sink per frame**: the part of it spent in the live connection's sinks
  (:func:`kame_core.serve.frame_sinks.connection_sinks`, behind one :class:`~kame_core.session.fan_out.FrameFanOut`),
  and each sink's own share (median, p99).

The input: ``--questions`` spoken questions (Piper) 12 s apart, answered by the tandem pipeline (streaming
faster-whisper, the SmolLM2 oracle, the CPU stand-in front-end, Piper). The longer the session, the more a
per-frame cost that grows with the trace shows.

Usage: ``python benchmarks/frame_thread_time.py [--questions 4] [--repeats 1]``
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from kame_core.clock import SAMPLE_RATE, RealTimeClock
from kame_core.protocols import TTS
from kame_core.record.trace import SessionTrace
from kame_core.serve.frame_sinks import connection_sinks
from kame_core.session import SessionDriver
from kame_core.session.driver import FrameOut
from kame_core.settings import Settings
from kame_core.stacks.build import cpu_stack
from kame_core.testing.timing import Timing

QUESTIONS = ("What is the capital city of France?", "Who wrote the play Romeo and Juliet?",
             "How many legs does a spider have?", "What is the boiling point of water?",
             "Which planet is closest to the sun?", "What language is spoken in Brazil?")
GAP_S = 12.0


def user_recording(tts: TTS, questions: int) -> np.ndarray:
    """Each question at ``0.6 + k * GAP_S`` s; silence elsewhere, and ``GAP_S`` of it after the last."""
    audio = np.zeros(int((questions * GAP_S + 0.6) * SAMPLE_RATE), np.float32)
    for k in range(questions):
        clip = tts.synthesize(QUESTIONS[k % len(QUESTIONS)]).audio
        at = int((0.6 + k * GAP_S) * SAMPLE_RATE)
        audio[at: at + len(clip)] = clip[: len(audio) - at]
    return audio


class LoopThreadClock(RealTimeClock):
    """The real-time clock, noting the loop thread's CPU time at every frame's wake-up."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups: list[float] = []

    async def sleep_until(self, t: float) -> None:
        await super().sleep_until(t)
        self.wakeups.append(time.thread_time())


class TimedSink:
    """The live server's sinks in their fan-out order, the CPU time per frame of all of them and of each noted."""

    def __init__(self, driver: SessionDriver) -> None:
        self.sinks = connection_sinks(lambda messages: None, pcm_out=False, trace_of=lambda: self._trace(driver))
        self.times: list[float] = []
        self.each: dict[str, list[float]] = {type(sink).__name__: [] for sink in self.sinks}

    @staticmethod
    def _trace(driver: SessionDriver) -> SessionTrace | None:
        return None if driver.session is None else driver.session.trace

    def on_frame(self, frame: FrameOut) -> None:
        start = before = time.thread_time()
        for sink in self.sinks:
            sink.on_frame(frame)
            after = time.thread_time()
            self.each[type(sink).__name__].append(after - before)
            before = after
        self.times.append(time.thread_time() - start)

    def end(self) -> None:
        for sink in self.sinks:
            sink.on_end()


def ms(seconds: list[float]) -> str:
    t = Timing.of(seconds)
    return f"median {t.median_ms:.2f} ms, p99 {t.p99_ms:.2f} ms, max {t.max_ms:.1f} ms (n={t.samples})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    files = Settings.from_env(os.environ).stack.files
    stack = cpu_stack(llm="offline", files=files, realtime=True)  # as the live server builds it
    audio = user_recording(stack.tts, args.questions)
    load = getattr(stack.llm, "load", None)  # the oracle's worker process, started and loaded
    if callable(load):
        load()
    with stack.session("kame", clock=RealTimeClock()) as warm:  # every model loaded and run once
        warm.run_sync(audio[: 3 * SAMPLE_RATE])
    print(f"cores {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; input {len(audio) / SAMPLE_RATE:.1f} s")
    loop_times: list[float] = []
    sink_times: list[float] = []
    each: dict[str, list[float]] = {}
    for r in range(args.repeats):
        clock = LoopThreadClock()
        with stack.session("kame", clock=clock) as driver:
            sink = TimedSink(driver)
            trace = driver.run_sync(audio, sink)
            sink.end()
        for name, times in sink.each.items():
            each.setdefault(name, []).extend(times)
        per_frame = list(np.diff(clock.wakeups))
        loop_times += per_frame
        sink_times += sink.times
        print(f"run {r + 1}: {trace.n_frames} frames; loop thread per frame {ms(per_frame)}; "
              f"sink per frame {ms(sink.times)}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\nSUMMARY")
    print(f"  loop thread per frame: {ms(loop_times)}")
    print(f"  sink per frame:        {ms(sink_times)}")
    for name, times in each.items():
        print(f"    {name + ':':<22} {ms(times)}")


if __name__ == "__main__":
    main()
