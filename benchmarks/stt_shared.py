"""STT lag and CPU use of N concurrent real-time sessions: one shared, batched Whisper worker vs a decode per session.

Each session is a thread that feeds its own ~12 s recording (two Piper questions, staggered onsets) to a
:class:`~kame_core.stt.WhisperStreamingSTT` in real time, 80 ms frames, catching up at once when it falls behind.
Printed per N and mode:

* STT lag: end of a spoken word's audio -> the first partial or final (emitted, in wall time) containing it
  (median / p90 / max; words that never appeared are counted apart)
* CPU use: process CPU seconds / wall seconds over the run (cores busy; this machine's core count is printed)
* the shared worker's batches: how many, and the mean batch size

``shared`` decodes through one :class:`~kame_core.stt.SharedWhisper` on ``--device``; ``alone`` is today's path,
each session decoding by itself (on the CPU, the process's one model). Usage::

    python benchmarks/stt_shared.py [--n 1,2,4] [--device cpu|cuda] [--modes shared,alone] [--max-pad-s S] [--repeats R]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE
from kame_core.protocols import Word
from kame_core.record.trace import iter_frames
from kame_core.settings import Settings
from kame_core.stt import SharedWhisper, WhisperStreamingSTT
from kame_core.tts import make_tts

QUESTIONS = ("What is the capital city of France?", "Who wrote the play Romeo and Juliet?",
             "How many people live in Tokyo?", "I would like to know the weather in London tomorrow.",
             "Can you recommend a good book about the history of Rome?", "What time does the museum open?")
LENGTH_S = 12.0


@dataclass
class Outcome:
    lags: list[float]
    missed_words: int
    words: int


@dataclass
class Totals:
    """One (N, mode) over its repeats."""

    lags: list[float] = field(default_factory=list)
    missed: int = 0
    words: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    requests: int = 0
    batches: int = 0

    def add(self, outcomes: list[Outcome], wall: float, cpu: float) -> None:
        self.lags += [lag for o in outcomes for lag in o.lags]
        self.missed += sum(o.missed_words for o in outcomes)
        self.words += sum(o.words for o in outcomes)
        self.wall += wall
        self.cpu += cpu

    def line(self, n: int, mode: str) -> str:
        lags = [1000 * lag for lag in self.lags]
        p90 = statistics.quantiles(lags, n=10)[8] if len(lags) > 1 else float("nan")
        median = statistics.median(lags) if lags else float("nan")
        batches = f"{self.batches:>8} {self.requests / self.batches:>10.2f}" if self.batches else ""
        return (f"{n:>3} {mode:7} {median:>8.0f}ms {p90:>5.0f}ms {max(lags, default=float('nan')):>5.0f}ms "
                f"{self.missed:>3}/{self.words:<3} {self.cpu / max(self.wall, 1e-9):>10.2f} {batches}")


def recording(tts: object, i: int) -> tuple[np.ndarray, list[Word]]:
    """Session ``i``'s audio: two questions, the first after a lead that differs per session."""
    audio = np.zeros(int(LENGTH_S * SAMPLE_RATE), np.float32)
    words: list[Word] = []
    lead = 0.4 + (0.53 * i) % 2.0
    for k, start in enumerate((lead, lead + 5.5)):
        synthesis = tts.synthesize(QUESTIONS[(i + k) % len(QUESTIONS)])  # type: ignore[attr-defined]
        at = int(start * SAMPLE_RATE)
        clip = synthesis.audio[: len(audio) - at]
        audio[at: at + len(clip)] = clip
        words += [Word(w.text, w.start + start, w.end + start) for w in synthesis.words]
    return audio, words


def norm(text: str) -> list[str]:
    return [w for w in (re.sub(r"[^a-z0-9']", "", part.lower()) for part in text.split()) if w]


def word_lags(updates: list[tuple[float, str]], spoken: list[Word], window_s: float = 6.0) -> Outcome:
    """Per spoken word, seconds from its audio's end to the first update (emitted at that session time)
    that contains it."""
    said = [(t, set(norm(text))) for t, text in sorted(updates)]
    lags, missed = [], 0
    for word in spoken:
        target = norm(word.text)
        lag = next((t - word.end for t, words in said
                    if word.start <= t <= word.end + window_s and target and all(w in words for w in target)), None)
        if lag is None:
            missed += 1
        else:
            lags.append(lag)
    return Outcome(lags, missed, len(spoken))


def live_session(stt: WhisperStreamingSTT, audio: np.ndarray, spoken: list[Word], start: threading.Barrier,
                 out: list[Outcome]) -> None:
    """Feed ``audio`` in real time; note when each partial / final came out (session seconds)."""
    stt.reset()
    updates: list[tuple[float, str]] = []
    start.wait()
    t0 = time.perf_counter()
    for k, frame in enumerate(iter_frames(audio)):
        due = t0 + (k + 1) * FRAME_SECONDS  # the frame's audio exists from here on
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        events = stt.accept(frame)
        now = time.perf_counter() - t0
        updates += [(now, e.text) for e in events if e.kind in ("partial", "final")]
    updates += [(time.perf_counter() - t0, e.text) for e in stt.flush() if e.kind in ("partial", "final")]
    out.append(word_lags(updates, spoken))


def run(n: int, make_stt: object, sessions: list[tuple[np.ndarray, list[Word]]]) -> tuple[list[Outcome], float, float]:
    """``n`` sessions at once; their outcomes, the wall seconds and the process CPU seconds."""
    stts = [make_stt() for _ in range(n)]  # type: ignore[operator]
    barrier = threading.Barrier(n + 1)
    outcomes: list[Outcome] = []
    threads = [threading.Thread(target=live_session, args=(stts[i], *sessions[i], barrier, outcomes))
               for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    return outcomes, time.perf_counter() - wall0, time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="1,2,4", help="concurrent sessions, comma-separated")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="the shared worker's device")
    parser.add_argument("--modes", default="shared,alone", help="shared, alone or both")
    parser.add_argument("--max-pad-s", type=float, default=None, help="the shared worker's padding slack")
    parser.add_argument("--repeats", type=int, default=1, help="runs per N and mode, taking turns")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    counts = [int(x) for x in args.n.split(",")]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    files = Settings.from_env(os.environ).stack.files
    tts = make_tts("auto")
    sessions = [recording(tts, i) for i in range(max(counts))]
    options = {} if args.max_pad_s is None else {"max_pad_s": args.max_pad_s}
    worker = SharedWhisper.load(files=files, device=args.device, **options) if "shared" in modes else None
    warm = WhisperStreamingSTT(files=files)
    for frame in iter_frames(sessions[0][0][: 4 * SAMPLE_RATE]):
        warm.accept(frame)
    if worker is not None:
        worker.client().transcribe(np.zeros(32_000, np.float32))
    print(f"cores {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; tts {type(tts).__name__}; "
          f"recordings {LENGTH_S:.0f} s, 2 questions each; shared worker on {args.device}"
          + (f", max_pad_s {worker.max_pad_s}" if worker else "") + "; 'alone' decodes on the CPU")
    print(f"{'N':>3} {'mode':7} {'lag median':>10} {'p90':>7} {'max':>7} {'missed':>7} {'CPU s/wall':>10} "
          f"{'batches':>8} {'mean batch':>10}")
    totals: dict[tuple[int, str], Totals] = {}
    for n in counts:
        for mode in modes:
            totals[(n, mode)] = Totals()
        for _ in range(args.repeats):  # the modes take turns, so a busy spell on the machine hits both
            for mode in modes:
                before = worker.stats() if worker else None
                if mode == "shared":
                    assert worker is not None
                    outcomes, wall, cpu = run(n, lambda: WhisperStreamingSTT(shared=worker), sessions)
                else:
                    outcomes, wall, cpu = run(n, lambda: WhisperStreamingSTT(files=files), sessions)
                total = totals[(n, mode)]
                total.add(outcomes, wall, cpu)
                if mode == "shared" and worker is not None and before is not None:
                    after = worker.stats()
                    total.requests += after.requests - before.requests
                    total.batches += after.batches - before.batches
        for mode in modes:
            print(totals[(n, mode)].line(n, mode), flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
