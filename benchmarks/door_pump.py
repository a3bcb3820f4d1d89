"""What the door costs: the replicas' one door (:class:`kame_core.serve.ingress.Ingress` under uvicorn, as
``serve --replicas`` runs it) pumping N real-time sessions to K stand-in replicas, against the same clients
connected to the replicas directly.

Three kinds of process, so that each one's CPU is its own: the **replicas** (K websocket servers in one process;
each answers every message a client sends with a message of the same size, as a replica answers each 80 ms frame
of audio with one of its own; no models), the **door** (its own process: the ingress app with the server's uvicorn
options, its replicas' links answering status at once) and the **clients** (N sessions in one process, started over
a second; each sends a 160-byte message every 80 ms -- an Opus page's size -- carrying its send time, and reads the
answers). Per N, for ``--seconds`` each:

* **door CPU per session-second**: the door process's CPU time (user + system) while every session streams (from
  the last one's first message to the first one's last: admissions and closes are left out), divided by the
  sessions and the seconds (ms); and the share of one core it used then;
* **added delay**: the round trip through the door less the round trip direct, at p50 and p99 (ms); the clients'
  own and the replicas' delays are in both;
* **lost**: messages sent that never came back (either way).

The ceiling is the most sessions one door process carries before it adds 5 ms at p99 or uses a whole core. On a
machine with few cores the clients and replicas compete with the door: the figures are this machine's.

Usage: ``python benchmarks/door_pump.py [--sessions 50 100 200] [--replicas 4] [--seconds 10] [--door-ws auto]
[--procs 1] [--json FILE]`` (``--procs``: client processes, and replica processes up to one a replica; the GPU
check runs it at 500 and 1,000 sessions on the device machine's 16 cores: ``benchmarks/device/check.py``)

Measured (2026-12-04, 2 cores, uvloop, no deflate; clients, replicas and door share the cores): 1.3-2.0 ms of door
CPU per session-second from 50 to 400 sessions, +0.2-1.4 ms p50 and +1.1-2.8 ms p99 up to 200 sessions (a third of
a core), +23 ms p99 at 400 (half a core, the clients' and replicas' processes taking the rest). A profile of the
door (py-spy, 200 sessions): two thirds of its CPU is the event loop's own I/O (a receive and a send per message on
each leg), a third the websocket framing in Python: a door in Python costs about a millisecond per session-second
whatever its framing, at 12.5 messages a second each way.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = os.path.abspath(__file__)
MESSAGE_BYTES = 160  # an Opus page of one 80 ms frame, about
PERIOD_S = 0.08
_STAMP = struct.Struct("<dI")  # send time (monotonic, shared by the machine's processes), sequence


# ------------------------------------------------------------------------------------------------ replicas
async def replicas(ports: list[int]) -> None:
    """K stand-in replicas: the handshake first (a door claims a session by it), then every message answered with
    one of the same bytes."""
    from websockets.asyncio.server import serve

    async def answer(ws: Any) -> None:
        await ws.send(b"\x00")
        async for message in ws:
            await ws.send(message)

    servers = [await serve(answer, "127.0.0.1", port, compression=None, max_size=None) for port in ports]
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


# ------------------------------------------------------------------------------------------------ the door
@dataclass
class StandInLink:
    """A replica's link as the door sees it: always ready, no session limit, at ``address``."""

    index: int
    address: str

    async def status(self) -> dict[str, Any]:
        return {"ready": True, "free_slots": None, "active": 0, "address": self.address}

    async def metrics(self) -> str:
        return ""

    async def stop(self) -> bool:
        return True


@dataclass(frozen=True)
class DoorLimits:
    """What the server's uvicorn options are derived from (:func:`kame_core.serve.http.uvicorn_options`)."""

    max_sessions: int | None
    limits: Any


def door(port: int, replica_ports: list[int], max_sessions: int, ws: str = "auto") -> None:
    """The ingress app on ``port`` with the server's uvicorn options, in front of the stand-in replicas."""
    import uvicorn

    from kame_core.access import Access
    from kame_core.serve.http import uvicorn_options
    from kame_core.serve.ingress import Ingress, ReplicaLink, ingress_app
    from kame_core.serve.protocol import Limits

    links: list[ReplicaLink] = [StandInLink(i, f"127.0.0.1:{p}") for i, p in enumerate(replica_ports)]
    ingress = Ingress(links, token="stand-in", access=Access().bound_to("127.0.0.1"))
    options = uvicorn_options(DoorLimits(max_sessions, Limits()))
    uvicorn.run(ingress_app(ingress), host="127.0.0.1", port=port, log_level="warning", ws=ws, **options)


# ------------------------------------------------------------------------------------------------ clients
async def one_client(url: str, seconds: float, lead_s: float, streaming: list[int]) -> tuple[int, list[float]]:
    """One session: a message every 80 ms for ``seconds``; (sent, round trips in seconds). ``streaming`` counts
    the sessions that sent their first message: the last one says ``steady`` on stdout."""
    from websockets.asyncio.client import connect

    await asyncio.sleep(lead_s)
    trips: list[float] = []
    sent = 0
    async with connect(url, max_size=None) as ws:
        async def read() -> None:
            async for message in ws:
                if not isinstance(message, bytes) or message[:1] != b"\x01":
                    continue  # the handshake
                t, _ = _STAMP.unpack_from(message, 1)
                trips.append(time.monotonic() - t)

        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0.2)  # the handshake
        start = time.monotonic()
        pad = bytes(MESSAGE_BYTES - 1 - _STAMP.size)
        while (now := time.monotonic()) - start < seconds:
            await ws.send(b"\x01" + _STAMP.pack(now, sent) + pad)
            sent += 1
            if sent == 1:
                streaming[1] += 1
                if streaming[1] == streaming[0]:
                    print("steady", flush=True)
            await asyncio.sleep(max(0.0, start + sent * PERIOD_S - time.monotonic()))
        await asyncio.sleep(0.5)  # the last answers
        reader.cancel()
    return sent, trips


async def clients(urls: list[str], seconds: float) -> dict[str, Any]:
    streaming = [len(urls), 0]  # sessions, sessions streaming
    results = await asyncio.gather(*(one_client(url, seconds, i / len(urls), streaming)
                                     for i, url in enumerate(urls)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    done = [r for r in results if not isinstance(r, BaseException)]
    return {"sent": sum(s for s, _ in done), "failed": len(failed),
            "first_failure": repr(failed[0])[:200] if failed else "",
            "trips_ms": [round(t * 1000, 3) for _, ts in done for t in ts]}


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several client processes' figures as one: messages sent and received, failed sessions, p50 / p99 round
    trip (ms) over every message."""
    trips = np.array([t for part in parts for t in part["trips_ms"]], dtype=np.float64)
    failures = [part["first_failure"] for part in parts if part["first_failure"]]
    return {"sent": sum(part["sent"] for part in parts), "received": int(len(trips)),
            "failed": sum(part["failed"] for part in parts), "first_failure": failures[0] if failures else "",
            "p50_ms": float(np.percentile(trips, 50)) if len(trips) else None,
            "p99_ms": float(np.percentile(trips, 99)) if len(trips) else None}


# ------------------------------------------------------------------------------------------------ the run
def start_role(*args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, HERE, *args], stdout=subprocess.PIPE, text=True)
    return process


def wait_listening(port: int, timeout_s: float = 20.0) -> None:
    from kame_core.testing.servers import listens

    deadline = time.monotonic() + timeout_s
    while not listens(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on {port} after {timeout_s:.0f} s")
        time.sleep(0.1)


def run_clients(urls: list[str], seconds: float, door_pid: int | None = None,
                procs: int = 1) -> tuple[dict[str, Any], float]:
    """The clients' figures (``procs`` processes, the sessions dealt out between them, so that no client process
    is the bottleneck), and the door's CPU seconds per wall second while every session streamed (0 without
    ``door_pid``)."""
    shares = [urls[k::procs] for k in range(max(1, min(procs, len(urls))))]
    started = [subprocess.Popen([sys.executable, HERE, "--role", "clients", "--seconds", str(seconds), *part],
                                stdout=subprocess.PIPE, text=True) for part in shares]
    firsts = []
    for process in started:  # each says "steady" once its sessions all stream
        assert process.stdout is not None
        firsts.append(process.stdout.readline())
    share = 0.0
    if all(line.strip() == "steady" for line in firsts) and door_pid is not None:
        window = max(1.0, seconds - 1.5)  # the first session stops ~1 s after the last one started
        before, t0 = cpu_s(door_pid), time.monotonic()
        time.sleep(window)
        share = (cpu_s(door_pid) - before) / (time.monotonic() - t0)
    parts = []
    for process, first in zip(started, firsts, strict=True):
        assert process.stdout is not None
        rest = process.stdout.read()
        if process.wait(seconds + 120) != 0:
            raise RuntimeError(f"the clients failed ({process.returncode})")
        parts.append(dict(json.loads((first + rest).strip().splitlines()[-1])))
    return merged(parts), share


def cpu_s(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--door-ws", default="auto", help="uvicorn's websocket implementation for the door "
                        "(auto, websockets, websockets-sansio, wsproto)")
    parser.add_argument("--procs", type=int, default=1,
                        help="client processes (and replica processes, at most one a replica): on a machine with "
                        "cores to spare, enough that neither the clients nor the replicas limit the door")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--role", choices=["main", "replicas", "door", "clients"], default="main")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args()
    if args.role == "replicas":
        asyncio.run(replicas([int(p) for p in args.rest]))
        return
    if args.role == "door":
        door(args.port, [int(p) for p in args.rest], max(args.sessions), args.door_ws)
        return
    if args.role == "clients":
        print(json.dumps(asyncio.run(clients(args.rest, args.seconds))), flush=True)
        return

    from kame_core.testing.servers import free_port

    if args.procs < 1 or args.replicas < 1 or min(args.sessions) < 1:
        parser.error("--procs, --replicas and every --sessions count must be at least 1")
    replica_ports = [free_port() for _ in range(args.replicas)]
    door_port = free_port()
    groups = [replica_ports[k::args.procs] for k in range(min(args.procs, args.replicas))]
    started = [*(start_role("--role", "replicas", *map(str, group)) for group in groups),
               start_role("--role", "door", "--port", str(door_port), "--door-ws", args.door_ws,
                          "--sessions", *map(str, args.sessions), "--", *map(str, replica_ports))]
    door_process = started[-1]
    rows: list[dict[str, Any]] = []
    try:
        for port in [*replica_ports, door_port]:
            wait_listening(port)
        print(f"cores {os.cpu_count()}; {args.replicas} stand-in replicas in {len(groups)} process(es), clients in "
              f"{args.procs}; {args.seconds:.0f} s per run; {MESSAGE_BYTES}-byte messages every "
              f"{PERIOD_S * 1000:.0f} ms each way")
        print(f"{'sessions':>8} | {'door CPU ms/session-s':>21} | {'door core %':>11} | {'direct p50/p99 ms':>17} | "
              f"{'door p50/p99 ms':>15} | {'added p50/p99 ms':>16} | lost")
        for n in args.sessions:
            direct, _ = run_clients([f"ws://127.0.0.1:{replica_ports[i % args.replicas]}/api/chat"
                                      for i in range(n)], args.seconds, procs=args.procs)
            through, share = run_clients([f"ws://127.0.0.1:{door_port}/api/chat"] * n, args.seconds,
                                          door_process.pid, procs=args.procs)
            lost = (direct["sent"] - direct["received"], through["sent"] - through["received"])
            failed = f" (failed sessions: direct {direct['failed']}, door {through['failed']}: " \
                     f"{through['first_failure'] or direct['first_failure']})" \
                if direct["failed"] or through["failed"] else ""
            print(f"{n:>8} | {share * 1000 / n:>21.2f} | {100 * share:>11.0f} | "
                  f"{direct['p50_ms']:>7.2f} / {direct['p99_ms']:>6.2f} | {through['p50_ms']:>6.2f} / "
                  f"{through['p99_ms']:>6.2f} | {through['p50_ms'] - direct['p50_ms']:>7.2f} / "
                  f"{through['p99_ms'] - direct['p99_ms']:>6.2f} | direct {lost[0]}, door {lost[1]}{failed}",
                  flush=True)
            rows.append({"sessions": n, "door_cpu_ms_per_session_s": round(share * 1000 / n, 3),
                         "door_core_share": round(share, 3), "direct": direct, "door": through,
                         "added_p50_ms": round(through["p50_ms"] - direct["p50_ms"], 3),
                         "added_p99_ms": round(through["p99_ms"] - direct["p99_ms"], 3),
                         "lost": {"direct": lost[0], "door": lost[1]}})
            if args.json is not None:
                args.json.write_text(json.dumps({"cores": os.cpu_count(), "replicas": args.replicas,
                                                 "procs": args.procs, "seconds": args.seconds, "rows": rows},
                                                indent=1))
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(10)


if __name__ == "__main__":
    main()
