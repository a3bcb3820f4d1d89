"""Live, in real time, on this CPU: one tandem session with the real offline stack.

Replays a synthesized ~20 s user recording (Piper, two questions) through the *real-time* clock with
streaming faster-whisper STT, the SmolLM2 oracle, the CPU stand-in front-end and Piper, then the cascade on the
same input, and prints:

* missed 80 ms frame deadlines (a frame must be produced within 80 ms of its due time; goal <= 1 %)
* STT partial lag: end of a word's audio -> first partial/final containing it (goal: median <= 300 ms)
* oracle time to first token (LLM request start -> first non-empty chunk)
* onset latency per user turn, tandem vs cascade (negative: the front-end started before the user ended)

Usage: ``python benchmarks/live_cpu.py [--repeats N] [--oracle-llm SPEC]``. Models are loaded and warmed up
before the clock starts; the load average is printed because other processes share the cores.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

from kame_core.analysis.metrics import stt_word_lags, turn_onsets
from kame_core.clock import SAMPLE_RATE, RealTimeClock
from kame_core.pipelines import Mode
from kame_core.protocols import TTS, Word
from kame_core.record.trace import EventKind, SessionTrace
from kame_core.settings import Settings
from kame_core.stacks.build import cpu_stack
from kame_core.stacks.stack import Stack
from kame_core.testing.timing import Timing

QUESTIONS = ("What is the capital city of France?", "Who wrote the play Romeo and Juliet?")
STARTS_S = (0.6, 10.0)
LENGTH_S = 20.0


def user_recording(tts: TTS) -> tuple[np.ndarray, list[Word]]:
    """~20 s of audio: each question at its start time, silence elsewhere; the words with session times."""
    audio = np.zeros(int(LENGTH_S * SAMPLE_RATE), np.float32)
    words: list[Word] = []
    for question, start in zip(QUESTIONS, STARTS_S):
        synthesis = tts.synthesize(question)
        at = int(start * SAMPLE_RATE)
        clip = synthesis.audio[: len(audio) - at]
        audio[at: at + len(clip)] = clip
        words += [Word(w.text, w.start + start, w.end + start) for w in synthesis.words]
    return audio, words


def warm_up(stack: Stack, audio: np.ndarray) -> None:
    """Load every model and run each once, so the timed sessions measure steady state."""
    load = getattr(stack.llm, "load", None)  # the oracle's model (its worker process with realtime)
    if callable(load):
        load()
    stt = stack.make_stt()
    for i in range(0, 3 * SAMPLE_RATE, 1920):
        stt.accept(audio[i: i + 1920])
    stt.flush()
    stack.tts.synthesize("Warming up the voice.")
    if hasattr(stack.llm, "complete"):
        stack.llm.complete("Say hello.")


def missed_deadlines(trace: SessionTrace) -> tuple[int, list[float]]:
    lates = [float(e.data["late_ms"]) for e in trace.events_of(EventKind.NOTE)
             if e.data.get("what") == "missed frame deadline"]
    return len(lates), lates


def oracle_ttfts(trace: SessionTrace) -> list[float]:
    starts = {e.data["request"]: e.t for e in trace.events_of(EventKind.LLM_REQUEST_START)}
    return [e.t - starts[e.data["request"]] for e in trace.events_of(EventKind.LLM_FIRST_CHUNK)
            if e.data.get("request") in starts]


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    t = Timing.of(values)
    return f"median {t.median_ms:.0f} ms, p90 {t.p90_ms:.0f} ms, max {t.max_ms:.0f} ms (n={t.samples})"


def report(name: str, trace: SessionTrace, words: list[Word], wall_s: float) -> dict[str, Any]:
    n_missed, lates = missed_deadlines(trace)
    lags = stt_word_lags(trace, words)
    found = [lag for lag in lags if lag is not None]
    onsets = turn_onsets(trace)
    print(f"\n[{name}] {trace.n_frames} frames ({trace.n_frames * 0.08:.1f} s session) in {wall_s:.1f} s wall")
    print(f"  missed frame deadlines: {n_missed}/{trace.n_frames} = {100 * n_missed / max(trace.n_frames, 1):.2f} %"
          + (f" (worst {max(lates):.0f} ms late)" if lates else ""))
    print(f"  STT partial lag (word audio end -> first partial containing it): {ms(found)}; "
          f"{len(lags) - len(found)}/{len(lags)} words never appeared")
    if trace.events_of(EventKind.LLM_REQUEST_START):
        print(f"  oracle time to first token: {ms(oracle_ttfts(trace))}; "
              f"{len(trace.events_of(EventKind.LLM_REQUEST_START))} requests, "
              f"{len(trace.events_of(EventKind.LLM_REQUEST_CANCEL))} cancelled, "
              f"{len(trace.events_of(EventKind.ORACLE_RESET))} oracle revisions, "
              f"{len(trace.events_of(EventKind.SELF_CORRECTION))} self-corrections")
    for o in onsets:
        latency = "no response" if o.latency_s is None else f"{o.latency_s:+.2f} s"
        print(f"  turn {o.turn}: user ended {o.user_end:.2f} s, onset latency {latency}")
    print(f"  said: {trace.spoken_text()!r}")
    return {"missed": n_missed, "frames": trace.n_frames, "lags": found,
            "onsets": [o.latency_s for o in onsets]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--oracle-llm", default="offline")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # for huggingface_hub too
    files = Settings.from_env(os.environ).stack.files
    t0 = time.perf_counter()
    stack = cpu_stack(llm=args.oracle_llm, files=files, realtime=True)  # as the live server builds it
    audio, words = user_recording(stack.tts)
    warm_up(stack, audio)
    print(f"set-up + warm-up {time.perf_counter() - t0:.1f} s; cores {os.cpu_count()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("components:", *(f"  {role}: {what}" for role, what in stack.components.items()), sep="\n")
    print(f"user recording: {len(audio) / SAMPLE_RATE:.1f} s, questions at {STARTS_S} s: {QUESTIONS}")
    results: dict[str, list[dict[str, Any]]] = {"tandem": [], "cascade": []}
    for r in range(args.repeats):
        modes: tuple[tuple[Mode, str], ...] = (("kame", "tandem"), ("cascade", "cascade"))
        for mode, name in modes:
            runner = stack.runner(mode, clock=RealTimeClock())
            start = time.perf_counter()
            trace = runner.run_sync(audio)
            results[name].append(report(f"{name} #{r + 1}, real-time clock", trace, words,
                                        time.perf_counter() - start))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print("\nSUMMARY")
    for name, runs in results.items():
        missed = sum(int(x["missed"]) for x in runs)
        frames = sum(int(x["frames"]) for x in runs)
        lags = [lag for x in runs for lag in x["lags"]]
        onsets = [o for x in runs for o in x["onsets"] if o is not None]
        print(f"  {name:8s} missed deadlines {100 * missed / max(frames, 1):.2f} % (goal <= 1 %) | "
              f"STT lag median {statistics.median(lags) * 1000 if lags else float('nan'):.0f} ms (goal <= 300) | "
              f"onset median {statistics.median(onsets) if onsets else float('nan'):+.2f} s")


if __name__ == "__main__":
    main()
