"""What one semantic end-of-turn decision costs on this CPU (``kame_core.turns.end_of_turn.SmolLMEndOfTurn``): median
and p90 wall time per new transcript (the cache is bypassed: every text is new), and per transcript length.

Usage: ``python -m benchmarks.end_of_turn_cost [--repeats 5] [--precision auto,float32,bfloat16]`` (each precision
in turn, in one run, so their ratio is read off one machine state). It runs off the 80 ms frame loop; the number says
how many decisions per second one core affords.
"""
from __future__ import annotations

import argparse
import time

from kame_core.testing.timing import Timing
from kame_core.turns.end_of_turn import SmolLMEndOfTurn

TEXTS = {"short": "Who wrote", "question": "What is the capital of France?",
         "long": "I was wondering whether you could tell me what the weather will be like in London tomorrow "
                 "afternoon, because I am planning to walk along the river with two friends of mine"}


def measure(detector: SmolLMEndOfTurn, repeats: int) -> None:
    """Print one detector's cost per text and overall."""
    started = time.perf_counter()
    detector.load()
    print(f"SmolLM2 ({detector.dtype}) loaded in {time.perf_counter() - started:.1f} s")
    print(f"{'text':>9} {'words':>5} {'P(end)':>7} {'median ms':>9} {'p90 ms':>7}")
    every = []
    for name, text in TEXTS.items():
        times = []
        for k in range(repeats + 1):
            t0 = time.perf_counter()
            p = detector._score(text)  # the model call itself: the cache would answer repeats at no cost
            if k:  # the first call warms the kernels
                times.append(time.perf_counter() - t0)
        every += times
        timing = Timing.of(times)
        print(f"{name:>9} {len(text.split()):5d} {p:7.3f} {timing.median_ms:9.1f} {timing.p90_ms:7.1f}")
    overall = Timing.of(every)
    print(f"all ({detector.dtype}): median {overall.median_ms:.1f} ms, p90 {overall.p90_ms:.1f} ms per decision")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--precision", default="auto",
                        help="comma-separated: auto, float32, bfloat16 (auto: bfloat16 where the CPU has it natively)")
    args = parser.parse_args(argv)
    try:
        detectors = [SmolLMEndOfTurn(precision=p.strip()) for p in args.precision.split(",")]
    except ValueError as error:
        parser.error(str(error))
    for detector in detectors:
        measure(detector, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
