"""Two replicas on one CPU machine, two conversations at once: ``python -m kame_core.serve --replicas 2
--max-sessions 1`` (the CPU stack, a local Ray Serve) started as the command runs it, then two protocol clients at
once, each streaming a Piper-spoken question in real time (Ogg/Opus, 80 ms frames, ``--tail-s`` of silence after),
and, per session, the replica that served it and:

* missed 80 ms frame deadlines (%): frames its replica made more than one frame period late -- goal <= 1 %;
* output drift (s): how far the assistant's audio fell behind real time over the session, as the client received
  it (the largest minus the smallest "arrival time less audio position" of its chunks) -- real time keeps it
  near 0;
* onset after the end of the question (s), as :mod:`benchmarks.live_talk` measures it.

A third client at that moment must be refused with 1013 (printed). Then the server gets SIGTERM and must exit.
The load average is printed first: other processes on the same cores inflate every number.

Usage: ``python benchmarks/replicas_cpu.py [--rounds 2] [--tail-s 8] [--small-model]``
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from kame_core.clock import SAMPLE_RATE
from kame_core.serve.client import TalkResult, talk
from kame_core.testing.servers import free_port, listens
from kame_core.testing.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ("What is the capital city of France?", "How many legs does a spider have?")
MISSED_GOAL = 1.0


def drift_s(result: TalkResult) -> float:
    """How far the received audio fell behind real time over the session (seconds)."""
    lags, position = [], 0
    for at, chunk in result.audio:
        lags.append(at - position / SAMPLE_RATE)
        position += len(chunk)
    return max(lags) - min(lags) if lags else float("nan")


async def _refused(url: str) -> str:
    import websockets

    async with websockets.connect(url) as ws:
        try:
            await asyncio.wait_for(ws.recv(), 30)
        except websockets.ConnectionClosed:
            pass
        return f"{ws.close_code} {ws.close_reason!r}"


async def _round(url: str, audios: list[np.ndarray], tail_s: float) -> tuple[list[TalkResult], str]:
    async def third() -> str:
        await asyncio.sleep(2.0)
        return await _refused(url)

    refused = asyncio.ensure_future(third())
    results = await asyncio.gather(*(talk(url, a, tail_s=tail_s, lead_s=0.3 * k) for k, a in enumerate(audios)))
    return list(results), await refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tail-s", type=float, default=8.0)
    parser.add_argument("--small-model", action="store_true", help="stand-in openers from SmolLM2")
    args = parser.parse_args()

    from kame_core.tts import make_tts

    tts = make_tts("piper")
    audios = [tts.synthesize(q).audio for q in QUESTIONS]
    port = free_port()
    folder = tempfile.mkdtemp(prefix="kame-replicas-bench-")
    command = [sys.executable, "-m", "kame_core.serve", "--replicas", "2", "--max-sessions", "1", "--port",
               str(port), "--sessions-dir", folder, "--log-level", "warning"]
    if not args.small_model:
        command.append("--no-small-model")
    started = time.perf_counter()
    server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith(("ready at", "error")):
                print(line.strip(), flush=True)
                break
        else:
            raise SystemExit(f"the server exited ({server.wait()}) before it was ready")
        if not line.startswith("ready at"):
            raise SystemExit(1)
        threading.Thread(target=lambda: [None for _ in server.stdout or ()], daemon=True).start()  # keep it read
        print(f"started in {time.perf_counter() - started:.1f} s; {os.cpu_count()} cores", flush=True)
        wait_until(lambda: listens(port), 30, what="the ingress listening")
        url = f"ws://127.0.0.1:{port}/api/chat"
        print(f"{'round':>5} {'load1':>6} {'replica':>7} {'frames':>7} {'missed %':>9} {'drift s':>8} "
              f"{'onset s':>8}", flush=True)
        for r in range(1, args.rounds + 1):
            load = os.getloadavg()[0]
            results, refused = asyncio.run(_round(url, audios, args.tail_s))
            for result in results:
                saved = result.saved()
                frames = int(saved["frames"]) if saved else 0
                missed = 100.0 * result.missed_deadlines() / max(1, frames)
                onset = result.onset_after_question()
                print(f"{r:>5} {load:6.2f} {result.session.get('replica')!s:>7} {frames:7d} {missed:9.2f} "
                      f"{drift_s(result):8.2f} {onset if onset is None else round(onset, 2)!s:>8}", flush=True)
            print(f"      a third client meanwhile: {refused}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            code = server.wait()
        print(f"server stopped with exit status {code}", flush=True)


if __name__ == "__main__":
    main()
