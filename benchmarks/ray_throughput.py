"""Dataset builder throughput on the local executor vs a local Ray on this machine, and the Ray cluster size
needed to build the paper's 56,582 spoken sessions in one hour.

Both executors build the same question-answer pairs with the real TTS (Piper, joe voice) and the offline
simulator, with ``--workers`` workers (default 2: this machine's 2 cores). Local = a spawn process pool in
batches of 8 (the CLI default; a TTS load per batch) and in one batch per worker; Ray = one actor per worker
on a local Ray with ``workers`` CPUs. Ray is timed twice: end to end (``ray.init`` included) and from a
running Ray (actor start and TTS load included, as on a cluster that is already up). From Ray's dialogues per
minute *per worker* it derives the workers needed for 56,582 sessions in an hour, assuming one CPU per worker
and linear scaling (the driver only writes ~1 MB per dialogue).

    python benchmarks/ray_throughput.py [--dialogues 48] [--workers 2] [--tts piper]
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import tempfile
import time
from pathlib import Path

from kame_core.augment.simulator_factory import make_simulator
from kame_core.augment.spoken_dataset import BuildConfig, build_dataset, load_qa_pairs
from kame_core.augment.tts_factory import load_tts_backend
from kame_core.executors import LocalExecutor, ray_available
from kame_core.testing.qa import write_qa

PAPER_SESSIONS = 56_582
QA = [
    ("What is the boiling point of water at sea level?", "Water boils at one hundred degrees Celsius at sea level."),
    ("Who wrote the novel Pride and Prejudice?",
     "Pride and Prejudice was written by Jane Austen in eighteen thirteen."),
    ("How many planets are in the solar system?", "There are eight planets in our solar system."),
    ("Why is the sky blue during the day?", "Sunlight scatters off air molecules, and blue light scatters the most."),
]


def qa_file(folder: Path, n: int) -> Path:
    return write_qa(folder / "qa.jsonl", ({"id": f"q{i:05d}", "question": QA[i % len(QA)][0],
                                           "answer": QA[i % len(QA)][1]} for i in range(n)))


def timed_build(pairs, out: Path, tts: str, executor) -> tuple[int, float]:
    config = BuildConfig(out, functools.partial(load_tts_backend, tts), functools.partial(make_simulator, "offline"))
    t0 = time.perf_counter()
    summary = build_dataset(pairs, config, executor=executor, progress=False)
    wall = time.perf_counter() - t0
    if summary.failures:
        raise SystemExit(f"build failed: {summary.failures[:3]}")
    return summary.built, wall


def report(label: str, n: int, wall: float, workers: int) -> float:
    dpm = 60 * n / wall
    print(f"{label:<36} {n} dialogues in {wall:6.1f} s -> {dpm:6.1f} dialogues/min "
          f"({dpm / workers:5.1f} per worker)")
    return dpm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tts", default="piper")
    args = parser.parse_args()
    if not ray_available():
        raise SystemExit("Ray is not installed: pip install -c constraints.txt -r requirements-ray.txt")
    import ray

    from kame_core.executors.ray_executor import RayExecutor

    print(f"{args.dialogues} dialogues, {args.workers} workers, TTS {args.tts}, offline simulator; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        pairs = load_qa_pairs(qa_file(Path(tmp), args.dialogues))
        n, wall = timed_build(pairs, Path(tmp) / "local", args.tts,
                              LocalExecutor(workers=args.workers, batch_size=8, retries=1))
        local = report("local executor (batches of 8)", n, wall, args.workers)
        one_batch = math.ceil(args.dialogues / args.workers)  # one TTS load per worker, as a Ray actor has
        n, wall = timed_build(pairs, Path(tmp) / "local1", args.tts,
                              LocalExecutor(workers=args.workers, batch_size=one_batch, retries=1))
        local_one = report("local executor (1 batch per worker)", n, wall, args.workers)

        n, wall = timed_build(pairs, Path(tmp) / "ray_e2e", args.tts, RayExecutor(workers=args.workers))
        ray_e2e = report("ray, end to end (ray.init incl.)", n, wall, args.workers)

        t0 = time.perf_counter()
        executor = RayExecutor(workers=args.workers)
        executor.connect()  # a Ray that is already up, as a cluster is
        init_s = time.perf_counter() - t0
        try:
            n, wall = timed_build(pairs, Path(tmp) / "ray_warm", args.tts, executor)
        finally:
            ray.shutdown()
        ray_warm = report("ray, running Ray (actors incl.)", n, wall, args.workers)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other processes on these cores slow every number)")
    best_local = max(local, local_one)
    print(f"ray.init on this machine: {init_s:.1f} s; Ray / best local throughput: {ray_warm / best_local:.2f}x "
          f"(running Ray), {ray_e2e / best_local:.2f}x (end to end); < 1 means Ray costs more")
    per_worker = ray_warm / args.workers
    need = math.ceil(PAPER_SESSIONS / (60 * per_worker))
    print(f"{PAPER_SESSIONS} sessions in one hour = {PAPER_SESSIONS / 60:.0f} dialogues/min -> {need} Ray workers "
          f"at {per_worker:.1f} dialogues/min each (1 CPU per worker, linear scaling assumed; "
          f"{math.ceil(PAPER_SESSIONS / (60 * local / args.workers))} with the local executor's per-worker rate)")


if __name__ == "__main__":
    main()
