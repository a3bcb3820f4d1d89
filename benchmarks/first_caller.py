"""The first caller against the later ones: a fresh live server (the CPU stack), sessions one after another, each a
different Piper question of about the same length over the live protocol in real time (the same question again would
be answered from caches: the end-of-turn detector scores a transcript once); per session the onset after the question
on the wire (when the first voiced answer audio arrives after the last question frame was sent: what a listener
waits). ``--order`` rotates which question comes first, so that a question's own length is not read as warmth.

    python benchmarks/first_caller.py --floor gate --sessions 3

Prints each session's onset and session 1 against the median of the others (goal: equal within a frame, 0.08 s).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from kame_core.serve import ChatServer, standalone_app
from kame_core.serve.client import talk
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving
from kame_core.turns.floor_policies import FLOORS

QUESTIONS = ("What is the capital city of France?", "Who wrote the play Romeo and Juliet?",
             "How many legs does a spider have?", "What is the boiling point of water?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", default="gate", choices=list(FLOORS))
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--tail-s", type=float, default=4.0)
    parser.add_argument("--order", type=int, default=0, help="the question the first session asks (0-3)")
    args = parser.parse_args()
    if not 2 <= args.sessions <= len(QUESTIONS):
        parser.error(f"--sessions: 2 to {len(QUESTIONS)} (each a question of its own)")
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    asked = [QUESTIONS[(args.order + k) % len(QUESTIONS)] for k in range(args.sessions)]
    questions = [tts.synthesize(text).audio for text in asked]
    with tempfile.TemporaryDirectory() as folder:
        server = ChatServer(stack_from_cpu(floor=args.floor), max_sessions=1, sessions_dir=Path(folder))
        started = time.perf_counter()
        served = server.preload()
        print(f"ready in {time.perf_counter() - started:.1f} s (floor {args.floor}; {os.cpu_count()} cores)",
              flush=True)
        try:
            with serving(standalone_app(server), log_level="warning") as port:
                url = f"ws://127.0.0.1:{port}/api/chat"
                onsets = []
                for k in range(args.sessions):
                    result = asyncio.run(talk(url, questions[k], tail_s=args.tail_s, lead_s=0.3))
                    onset = result.onset_after_question()
                    onsets.append(onset)
                    print(f"session {k + 1} ({asked[k]!r}): onset after the question "
                          f"{onset if onset is None else round(onset, 3)} s", flush=True)
        finally:
            if served.llm_worker is not None:
                served.llm_worker.close()
    rest = [o for o in onsets[1:] if o is not None]
    if onsets[0] is not None and rest:
        print(f"first {onsets[0]:.3f} s, later median {statistics.median(rest):.3f} s: "
              f"{onsets[0] - statistics.median(rest):+.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
