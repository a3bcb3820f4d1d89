"""Spoken dataset builder throughput: question-answer pairs -> KAME layout (audio, text, oracle_raw).

Synthesizes both sides with the real TTS (Piper, joe voice), computes oracle records with the offline
simulator, and reports dialogues per minute for 1 and 2 worker processes on this machine.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kame_core.augment.cli import main as augment_main

QA = [
    ("What is the boiling point of water at sea level?", "Water boils at one hundred degrees Celsius at sea level."),
    ("Who wrote the novel Pride and Prejudice?",
     "Pride and Prejudice was written by Jane Austen in eighteen thirteen."),
    ("How many planets are in the solar system?", "There are eight planets in our solar system."),
    ("Why is the sky blue during the day?", "Sunlight scatters off air molecules, and blue light scatters the most."),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dialogues", type=int, default=16)
    parser.add_argument("--tts", default="piper")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        qa_path = Path(tmp) / "qa.jsonl"
        with qa_path.open("w") as f:
            for i in range(args.dialogues):
                q, a = QA[i % len(QA)]
                f.write(json.dumps({"id": f"q{i:04d}", "question": q, "answer": a}) + "\n")
        for workers in (1, 2):
            out = Path(tmp) / f"out{workers}"
            t0 = time.perf_counter()
            code = augment_main(["dataset", "--qa", str(qa_path), "--out-dir", str(out), "--workers", str(workers),
                                 "--tts", args.tts, "--simulator", "offline"])
            wall = time.perf_counter() - t0
            n = len(list((out / "oracle_raw").glob("*.json")))
            print(f"workers={workers}: {n} dialogues in {wall:.1f} s -> {60 * n / wall:.1f} dialogues/min "
                  f"(exit {code}; TTS {args.tts}, offline simulator)")


if __name__ == "__main__":
    main()
