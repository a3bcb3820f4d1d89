"""Virtual-clock throughput of the tandem runner: a 30 s KAME session with a trivial front-end, no TTS.

Goal: >= 50x real time on 2 cores. Prints the session length, wall time and the ratio (median of N runs).
The front-end, STT and LLM are the deterministic doubles from tests/doubles.py, so this measures the
runner, oracle manager and trace bookkeeping themselves.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from kame_core.analysis.metrics import session_metrics
from kame_core.clock import VirtualClock
from kame_core.pipelines.tandem import TandemRunner
from kame_core.session.config import SessionConfig
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, speech_like, words_at

QUESTIONS = [
    "could you tell me what the tallest mountain in europe is and how high it is",
    "and which country is it in exactly",
    "thanks now explain why the sky looks blue during the day but red at sunset",
]


def build(seconds: float) -> tuple[TandemRunner, np.ndarray]:
    segments, t = [], 0.5
    for q in QUESTIONS:
        seg = words_at(q, t, per_word=0.35)
        if seg[-1].end > seconds:  # a shorter session asks fewer questions
            break
        segments.append(seg)
        t = seg[-1].end + 6.0
    audio = speech_like([(s[0].start, s[-1].end) for s in segments], seconds)
    llm = ScriptedLLM(lambda u: "here is a confident short answer about " + " ".join(u.split()[-6:]))
    config = SessionConfig(max_tail_s=0.0, quiet_after_s=0.0)
    return TandemRunner(EchoFrontEnd(), ScriptedSTT(segments), llm, config, VirtualClock()), audio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    walls, trace = [], None
    for _ in range(args.runs):
        runner, audio = build(args.seconds)
        t0 = time.perf_counter()
        trace = runner.run_sync(audio)
        walls.append(time.perf_counter() - t0)
    assert trace is not None
    wall = statistics.median(walls)
    m = session_metrics(trace)
    print(f"session: {trace.duration:.1f} s, {trace.n_frames} frames, {len(trace.events)} events, "
          f"{m.llm_requests} LLM requests, {m.oracle_revisions} oracle revisions")
    print(f"wall time (median of {args.runs}): {wall * 1000:.1f} ms  (min {min(walls) * 1000:.1f} ms)")
    print(f"throughput: {trace.duration / wall:.0f}x real time (goal >= 50x)")


if __name__ == "__main__":
    main()
