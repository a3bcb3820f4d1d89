"""Full-Duplex-Bench over repeated passes: smooth turn-taking latency, pause-handling takeover, same every pass?

Copies every sample of ``--root`` (a Full-Duplex-Bench v1 folder: ``<task>/<id>/input.wav`` + annotation, e.g.
the benchmark repository's ``v1_v1.5/evaluation/example_data``) into a fresh folder per pass, runs
``python -m kame_core.eval fdb`` on it (the stack loaded once, every pass on the virtual clock; or ``--server``)
and prints per pass and task:

* smooth turn-taking: takeover rate and the benchmark's latency (first output word minus the end of the user's
  turn, clipped at 0) -- goal: turn taken, <= 1.0 s;
* pause handling: takeover rate during the user's pause -- goal 0 (no takeover in pauses);
* whether every pass wrote the same words at the same times (goal: identical).

With ``--fdb-eval DIR`` (the benchmark's ``v1_v1.5/evaluation`` folder) its own scoring scripts also score
each pass's folders, unchanged, and their result lines are printed.

Usage: ``python benchmarks/fdb_passes.py --root FDB/v1_v1.5/evaluation/example_data [--passes 3]
[--fdb-eval FDB/v1_v1.5/evaluation] [--mode kame] [--weights DIR] [--server ws://...]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kame_core.eval import fdb, fdb_cli
from kame_core.settings import settings_or_exit

SCRIPTS = {"smooth_turn_taking": "eval_smooth_turn_taking.py", "pause_handling": "eval_pause_handling.py"}


def copy_inputs(root: Path, dest: Path) -> None:
    """The samples' inputs and annotations only (no earlier outputs)."""
    fdb.mirror_inputs(fdb.find_samples(root), root, dest)


def words_of(root: Path) -> dict[str, list]:
    return {s.key(root): json.loads((s.folder / fdb.OUTPUT_JSON).read_text())["chunks"]
            for s in fdb.find_samples(root)}


def official_scores(eval_dir: Path, pass_root: Path) -> list[str]:
    lines = []
    for task_dir in sorted(p for p in pass_root.iterdir() if p.is_dir()):
        samples = fdb.find_samples(task_dir)
        script = SCRIPTS.get(samples[0].task)
        if script is None or not (eval_dir / script).is_file():
            continue
        done = subprocess.run([sys.executable, script, "--root_dir", str(task_dir)], cwd=eval_dir,
                              capture_output=True, text=True, timeout=600)
        found = [ln.strip() for ln in done.stdout.splitlines() if ln.startswith("Average")]
        lines.append(f"  {script} {task_dir.name}: " + ("; ".join(found) or f"failed: {done.stderr[-300:]}"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fdb_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--passes", type=int, default=3)
    own.add_argument("--fdb-eval", type=Path, default=None)
    mine, argv = own.parse_known_args()
    passes, eval_dir = mine.passes, mine.fdb_eval
    args = parser.parse_args(["fdb", *argv, "--no-progress", "--overwrite"])
    fdb_cli.check_args(args)
    source = args.root.resolve()
    started = time.perf_counter()
    settings = settings_or_exit(os.environ, "fdb_passes")
    parts = fdb_cli.prepare(args, settings)
    print(f"loaded in {time.perf_counter() - started:.1f} s: {parts.components}")
    results, words = [], []
    with tempfile.TemporaryDirectory(prefix="fdb-passes-") as tmp:
        for k in range(passes):
            pass_root = Path(tmp) / f"pass{k + 1}"
            copy_inputs(source, pass_root)
            args.root = pass_root
            t0 = time.perf_counter()
            scores = fdb_cli.run(args, say=lambda _line: None, parts=parts)
            wall = time.perf_counter() - t0
            results.append((k + 1, fdb.summarize(scores), wall))
            words.append(words_of(pass_root))
            print(f"pass {k + 1}: {len(scores)} samples in {wall:.1f} s")
            if eval_dir is not None:
                print("\n".join(official_scores(eval_dir.resolve(), pass_root)))
    print("\n| pass " + fdb.TABLE_HEAD.replace("\n|", "\n|---|"))
    for k, summaries, _ in results:
        for s in summaries:
            print(f"| {k} " + s.line())
    same = all(w == words[0] for w in words[1:])
    print(f"\nidentical words and times on every pass: {'yes' if same else 'NO'} ({passes} passes)")
    print("goals: smooth turn-taking takeover 1.0 with latency <= 1.0 s; pause handling takeover 0.0")


if __name__ == "__main__":
    main()
