"""The live server's resident memory over many sessions: does an ended session give its memory back?

Starts ``python -m kame_core.serve`` as a subprocess on the CPU stack (``--no-small-model``, sessions saved in a
temporary folder, a free port) -- a process of its own, so its RSS is the server's alone -- then runs
``--rounds`` rounds of ``--per-round`` real-time clients at once (:func:`kame_core.serve.client.talk`: a Piper
question, or a tone when Piper is unavailable, then silence up to ``--seconds``, then ``{"type": "end"}``).
After each round, once the server has no session left (``/readyz``), it reads the server's RSS and prints a
row: round, sessions finished so far (saved files), RSS in MB.

Last it prints the slope after warm-up: the least-squares fit of RSS against sessions finished over the rounds
after the first ``--warm-up`` (default 1: rounds 2..N), in MB per finished session -- goal <= 0.5 MB. A server
that frees its ended sessions levels off; one that keeps them (e.g. in reference cycles that only a rare full
garbage collection frees) grows by their traces, audio and per-session model state. What the allocator keeps
after a peak (glibc arenas, native caches growing to their high-water mark) also shows here, early on: run more
rounds, or raise ``--warm-up``, to tell the two apart.

Usage: ``python benchmarks/server_soak.py [--rounds 5] [--per-round 3] [--seconds 15] [--warm-up 1]``
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from kame_core.clock import SAMPLE_RATE
from kame_core.serve.client import talk
from kame_core.testing.servers import free_port, listens, wait_for_process
from kame_core.testing.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = ("What is the capital city of France?", "How many legs does a spider have?",
             "Who wrote the play Romeo and Juliet?")
GOAL_MB_PER_SESSION = 0.5


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` (psutil when installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {pid}") from None
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def questions() -> list[np.ndarray]:
    """Spoken questions (Piper); a tone for each when Piper is unavailable."""
    try:
        from kame_core.tts import make_tts

        tts = make_tts("piper")
        return [np.asarray(tts.synthesize(q).audio, np.float32) for q in QUESTIONS]
    except Exception as err:  # noqa: BLE001 - any missing voice or package: a tone says as much to the server
        print(f"Piper unavailable ({type(err).__name__}: {err}); the clients send a tone", flush=True)
        t = np.arange(int(2.0 * SAMPLE_RATE)) / SAMPLE_RATE
        return [(0.3 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)]


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ``ys`` against ``xs`` (nan with fewer than two distinct xs)."""
    if len(set(xs)) < 2:
        return float("nan")
    return float(np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)[0])


def active_sessions(port: int) -> int | None:
    """Sessions running now, as ``/readyz`` says (None if it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            body = reply.read()
    except urllib.error.HTTPError as err:
        body = err.read()
    except OSError:
        return None
    return int(json.loads(body).get("active", 0))


async def _round(url: str, audios: list[np.ndarray], per_round: int, seconds: float) -> int:
    """``per_round`` clients at once; how many were told their session was saved."""
    def one(k: int):
        audio = audios[k % len(audios)]
        lead = 0.3 * k
        return talk(url, audio, lead_s=lead, tail_s=max(0.5, seconds - lead - len(audio) / SAMPLE_RATE))

    results = await asyncio.gather(*(one(k) for k in range(per_round)), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            print(f"  a client failed: {type(r).__name__}: {r}", flush=True)
    return sum(1 for r in results if not isinstance(r, BaseException) and r.saved() is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each session (s of audio sent)")
    parser.add_argument("--warm-up", type=int, default=1, help="first rounds left out of the slope")
    parser.add_argument("--llm", default="offline")
    args = parser.parse_args()
    if not 0 <= args.warm_up < args.rounds - 1:
        parser.error("--warm-up must leave at least two rounds for the slope")
    audios = questions()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kame-soak-") as tmp:
        sessions, log_path = Path(tmp) / "sessions", Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kame_core.serve", "--port", str(port), "--sessions-dir", str(sessions),
                 "--no-small-model", "--llm", args.llm, "--max-sessions", str(args.per_round),
                 "--log-level", "warning"],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, HF_HUB_OFFLINE="1"))
            try:
                wait_for_process(proc, lambda: listens(port), timeout_s=300, what="the server", log=log_path)
                _soak(proc, port, sessions, audios, args)
            finally:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _soak(proc: subprocess.Popen[bytes], port: int, sessions: Path, audios: list[np.ndarray],
          args: argparse.Namespace) -> None:
    url = f"ws://127.0.0.1:{port}/api/chat"
    print(f"server pid {proc.pid} at {url}: CPU stack, {args.rounds} rounds x {args.per_round} sessions x "
          f"{args.seconds:g} s; {os.cpu_count()} cores", flush=True)
    print(f"{'round':>5} {'finished':>9} {'RSS MB':>9} {'load1':>6}", flush=True)
    print(f"{0:>5} {0:>9} {rss_mb(proc.pid):9.1f} {os.getloadavg()[0]:6.2f}", flush=True)
    xs: list[float] = []
    ys: list[float] = []
    for n in range(1, args.rounds + 1):
        t0 = time.monotonic()
        asyncio.run(_round(url, audios, args.per_round, args.seconds))
        wait_until(lambda: active_sessions(port) == 0, 120, every_s=0.2, what="every session to end")
        time.sleep(1.0)  # what the server does after a close (logging, the saved file) settles
        finished = len(list(sessions.glob("*.kame")))
        rss = rss_mb(proc.pid)
        print(f"{n:>5} {finished:>9} {rss:9.1f} {os.getloadavg()[0]:6.2f}  ({time.monotonic() - t0:.0f} s)",
              flush=True)
        if n > args.warm_up:
            xs.append(finished)
            ys.append(rss)
    per = slope(xs, ys)
    verdict = "ok" if per <= GOAL_MB_PER_SESSION else "over the goal"
    print(f"slope after warm-up (rounds {args.warm_up + 1}..{args.rounds}): {per:.2f} MB per finished session "
          f"(goal <= {GOAL_MB_PER_SESSION}: {verdict})", flush=True)


if __name__ == "__main__":
    main()
