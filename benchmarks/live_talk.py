"""N live-protocol clients at once, each streaming a spoken question in real time, on the CPU stack or on
the neural front-end's session pool (``--weights DIR --device cpu|cuda``).

Starts the standalone server (:mod:`kame_core.serve`: faster-whisper, the stand-in front-end or with
``--weights`` the neural one on one pool of ``--pool-size`` (default: the largest N), the SmolLM2 or ``--llm``
oracle, Piper) in this process on a free port, loaded before it listens, warms it with one session, then for
N = 1, 2, 3 ... runs N clients at once (:func:`kame_core.serve.client.talk`: Ogg/Opus frames sent every
80 ms, the question then ``--tail-s`` of silence; in a process of their own, on the same cores) and prints per N:

* missed 80 ms frame deadlines (%): frames the server made more than one frame period late (its ``note``
  events, sent live), over all frames of all sessions -- goal <= 1 %;
* assistant audio onset after the end of the question, as the client receives it (first voiced audio
  received after the last question frame was sent; 0 when the assistant was already speaking): median and
  p90 over the clients -- goal <= 1.0 s at N = 1.

* STT lag: the end of a word's audio to the first live partial or final containing it, median and p90 over
  every word of every client (goal: median <= 300 ms), and the words never heard;
* with ``--weights``: the pool's batched step (Mimi encode + LM step + Mimi decode for every session that
  handed a frame in), median and p99 wall time, and the mean number of sessions per step.

It stops after the first N that breaks real time (missed > 1 %) or at ``--max-n``. The load average is printed
before each N: other processes on the same cores inflate every number.

Usage: ``python benchmarks/live_talk.py [--max-n 3] [--ns 1,2] [--tail-s 10] [--llm offline]
[--weights DIR --device cpu --pool-size N]`` (``python -m kame_core.neural.tiny DIR`` makes a tiny checkpoint)
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kame_core.analysis.metrics import stt_word_lags
from kame_core.neural.choice import FrontEndChoice
from kame_core.protocols import Word
from kame_core.serve import ChatServer, standalone_app
from kame_core.serve.client import TalkResult, talk
from kame_core.settings import settings_or_exit
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving
from kame_core.testing.timing import Timing, percentile

QUESTIONS = ("What is the capital city of France?", "How many legs does a spider have?",
             "Who wrote the play Romeo and Juliet?", "What is the boiling point of water?")
MISSED_GOAL = 1.0
#: client k starts its question after k times this much silence
LEAD_S = 0.3


async def _round(url: str, audios: list[np.ndarray], tail_s: float, stagger_s: float = 0.0,
                 pcm: bool = False) -> list[TalkResult]:
    """Every client at once (client ``k`` connects ``k * stagger_s`` later: sessions at other frame phases);
    ``pcm``: raw PCM both ways instead of Opus."""
    async def client(k: int, audio: np.ndarray) -> TalkResult:
        await asyncio.sleep(k * stagger_s)
        return await talk(url, audio, tail_s=tail_s, lead_s=LEAD_S * k, pcm=pcm)

    return await asyncio.gather(*(client(k, a) for k, a in enumerate(audios)))


def _shifted(words: list[Word], by_s: float) -> list[Word]:
    return [Word(w.text, w.start + by_s, w.end + by_s) for w in words]


def _round_here(url: str, audios: list[np.ndarray], tail_s: float, stagger_s: float, pcm: bool) -> list[TalkResult]:
    return asyncio.run(_round(url, audios, tail_s, stagger_s, pcm))


def clients_apart(url: str, audios: list[np.ndarray], tail_s: float, stagger_s: float = 0.0,
                  pcm: bool = False) -> list[TalkResult]:
    """:func:`_round` in a process of its own, as real clients are: in the server's process the clients' Opus
    and websocket work would hold the server's GIL (they still share its cores)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as clients:
        return clients.submit(_round_here, url, audios, tail_s, stagger_s, pcm).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=3)
    parser.add_argument("--ns", default="", help="comma-separated N values (default 1..max-n until it breaks)")
    parser.add_argument("--tail-s", type=float, default=10.0)
    parser.add_argument("--stagger-s", type=float, default=0.0,
                        help="client k connects k times this later (sessions at other frame phases)")
    parser.add_argument("--llm", default="offline")
    parser.add_argument("--small-model", action="store_true", help="stand-in openers from SmolLM2")
    FrontEndChoice.add_arguments(parser)
    parser.set_defaults(pool_size=0)
    args = parser.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x.strip()] or list(range(1, args.max_n + 1))
    args.pool_size = args.pool_size or max(ns)
    choice = FrontEndChoice.from_args(args)

    import logging

    from kame_core.tts import make_tts

    logging.basicConfig(level=logging.WARNING)
    tts = make_tts("piper")
    spoken = [tts.synthesize(q) for q in QUESTIONS]
    audios, words = [s.audio for s in spoken], [list(s.words) for s in spoken]
    files = settings_or_exit(os.environ, "live_talk").stack.files
    server = ChatServer(stack_from_cpu(args.llm, small_model_openers=args.small_model, front_end=choice, files=files),
                        max_sessions=None, sessions_dir=Path(os.environ.get("TMPDIR", "/tmp")) / "kame-live-talk-bench")
    started = time.perf_counter()
    served = server.preload()
    pool = served.neural.kame if served.neural is not None else None
    print(f"loaded in {time.perf_counter() - started:.1f} s; front-end: "
          f"{served.neural.describe('kame') if served.neural is not None else 'CPU stand-in'}", flush=True)
    with contextlib.ExitStack() as held:
        if served.neural is not None:
            held.enter_context(served.neural)  # the pools close after the server stopped
        port = held.enter_context(serving(standalone_app(server), log_level="warning"))
        url = f"ws://127.0.0.1:{port}/api/chat"
        print(f"server at {url}; oracle LLM {args.llm!r}; {os.cpu_count()} cores", flush=True)
        print("warming up (one session) ...", flush=True)
        asyncio.run(_round(url, audios[:1], 6.0))
        _rounds(url, ns, audios, words, args.tail_s, pool, stop_when_broken=not args.ns, stagger_s=args.stagger_s)


def measure_round(url: str, n: int, audios: list[np.ndarray], tail_s: float, pool,
                  stagger_s: float = 0.0, words: list[list[Word]] | None = None, pcm: bool = False) -> dict[str, Any]:
    """N clients at once (``stagger_s`` apart): frames, missed deadlines, onsets after the question, (with a
    pool) its steps, and (with the questions' ``words``) the STT lag: the end of a word's audio to the first live
    partial or final containing it, over every word of every client."""
    load = os.getloadavg()[0]
    if pool is not None:
        pool.step_log.clear()
        pool.arrival_log.clear()
        pool.turnaround_log.clear()
    results = clients_apart(url, [audios[k % len(audios)] for k in range(n)], tail_s, stagger_s, pcm)
    frames = sum(int(saved["frames"]) if (saved := r.saved()) else 0 for r in results)
    missed = sum(r.missed_deadlines() for r in results)
    onsets = [o for o in (r.onset_after_question() for r in results) if o is not None]
    row: dict[str, Any] = {"n": n, "stagger_s": stagger_s, "load1": round(load, 2), "frames": frames,
                           "missed_pct": round(100.0 * missed / max(1, frames), 2),
                           "onset_median_s": round(statistics.median(onsets), 3) if onsets else None,
                           "onset_p90_s": round(percentile(onsets, 90), 3) if onsets else None,
                           "no_onset": n - len(onsets)}
    if words is not None:
        lags = [lag for k, r in enumerate(results)
                for lag in stt_word_lags(r.live_trace(), _shifted(words[k % len(words)], LEAD_S * k))]
        heard = [lag for lag in lags if lag is not None]
        row.update(stt_lag_median_ms=round(1000 * statistics.median(heard)) if heard else None,
                   stt_lag_p90_ms=round(1000 * percentile(heard, 90)) if heard else None,
                   words_unheard=len(lags) - len(heard))
    if pool is not None and pool.step_log:
        timing = Timing.of([t for t, _ in pool.step_log])
        row.update(step_median_ms=round(timing.median_ms, 2), step_p99_ms=round(timing.p99_ms, 2),
                   sessions_per_step=round(statistics.mean(k for _, k in pool.step_log), 2))
    if pool is not None and pool.arrival_log:
        after = list(pool.arrival_log)  # when each frame came, after its frame boundary
        row.update(arrival_p50_ms=round(1000 * percentile(after, 50), 1),
                   arrival_p90_ms=round(1000 * percentile(after, 90), 1),
                   arrival_p99_ms=round(1000 * percentile(after, 99), 1), gather_s=pool.gather_s)
        own = [took for took, came in pool.turnaround_log if came > 0.005]  # late sessions, which did not sleep
        if own:
            row.update(late_turnaround_p50_ms=round(1000 * percentile(own, 50), 1),
                       late_turnaround_p90_ms=round(1000 * percentile(own, 90), 1))
    return row


def _cell(value: Any, width: int, digits: int = 2) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def _rounds(url: str, ns: list[int], audios: list[np.ndarray], words: list[list[Word]], tail_s: float, pool,
            stop_when_broken: bool, stagger_s: float = 0.0) -> None:
    """One round of N clients at once per N, a table row each."""
    step_head = f" {'step med ms':>12} {'step p99 ms':>12} {'per step':>9}" if pool is not None else ""
    print(f"{'N':>2} {'load1':>6} {'frames':>7} {'missed %':>9} {'onset med s':>12} {'onset p90 s':>12} "
          f"{'no onset':>9} {'STT lag med ms':>15} {'p90 ms':>7} {'unheard':>8}{step_head}", flush=True)
    for n in ns:
        row = measure_round(url, n, audios, tail_s, pool, stagger_s, words)
        steps = (f" {row['step_median_ms']:12.1f} {row['step_p99_ms']:12.1f} {row['sessions_per_step']:9.2f}"
                 if "step_median_ms" in row else "")
        print(f"{n:>2} {row['load1']:6.2f} {row['frames']:7d} {row['missed_pct']:9.2f} "
              f"{_cell(row['onset_median_s'], 12)} {_cell(row['onset_p90_s'], 12)} {row['no_onset']:9d} "
              f"{_cell(row['stt_lag_median_ms'], 15, 0)} {_cell(row['stt_lag_p90_ms'], 7, 0)} "
              f"{row['words_unheard']:8d}{steps}", flush=True)
        if row["missed_pct"] > MISSED_GOAL and stop_when_broken:
            print(f"real time broke at N = {n} (missed > {MISSED_GOAL} %); largest N that held: {n - 1}")
            break


if __name__ == "__main__":
    main()
