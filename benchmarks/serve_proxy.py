"""Could Ray Serve's own HTTP proxy be the door (issue 47, item 4)? A trial on a local Ray: ``/api/chat`` as a
websocket route of a FastAPI ingress deployment (2 replicas; each answers the handshake, then echoes every
message, as :mod:`benchmarks.door_pump`'s stand-in replicas do), reached through Serve's proxy.

* **admission**: replicas of one session each (``max_ongoing_requests=1``) and a queue of one
  (``max_queued_requests=1``); four clients, half a second apart, each holding its session: what each one sees
  (the handshake, how long it waited for it, or how it was refused);
* **cost**: N real-time sessions (door_pump's clients: 160-byte messages every 80 ms each way) through the proxy:
  the proxy process's CPU per session-second while every session streams, and the round trip's p50 / p99, beside
  the same clients through our door (door_pump's) in the same run.

Usage: ``python -m benchmarks.serve_proxy [--sessions 100] [--seconds 10]`` (needs ``requirements-ray.txt``)
"""
# no ``from __future__ import annotations``: the route's annotations must be classes, not strings, for FastAPI to
# read them in Serve's replica, where the function arrives pickled without this module's globals
import argparse
import asyncio
import os
import subprocess
import time
from typing import Any

from fastapi import FastAPI, WebSocket
from starlette.websockets import WebSocketDisconnect

from benchmarks.door_pump import run_clients, start_role, wait_listening


def echo_app(max_ongoing: int, max_queued: int) -> Any:
    """The ingress deployment: the handshake, then every message echoed."""
    from ray import serve

    app = FastAPI()

    @serve.deployment(num_replicas=2, max_ongoing_requests=max_ongoing, max_queued_requests=max_queued,
                      ray_actor_options={"num_cpus": 0.5})
    @serve.ingress(app)
    class Echo:
        @app.websocket("/api/chat")
        async def chat(self, ws: WebSocket) -> None:
            await ws.accept()
            await ws.send_bytes(b"\x00")
            try:
                while True:
                    await ws.send_bytes(await ws.receive_bytes())
            except WebSocketDisconnect:
                pass

    return Echo.bind()  # type: ignore[attr-defined]  # serve.deployment makes it a Deployment


async def admission(port: int) -> list[str]:
    """Four clients half a second apart, each holding its session for 6 s: what each saw."""
    import websockets

    hold = asyncio.Event()

    async def one() -> str:
        t0 = time.monotonic()
        try:
            async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat", open_timeout=30) as ws:
                first = await ws.recv()
                waited = time.monotonic() - t0
                await hold.wait()
                return f"handshake {first!r} after {waited:.2f} s"
        except websockets.InvalidStatus as err:
            return f"refused before the upgrade: HTTP {err.response.status_code}"
        except Exception as err:  # noqa: BLE001 - reported as seen
            return f"failed: {type(err).__name__}: {str(err)[:80]}"

    tasks = []
    for _ in range(4):
        tasks.append(asyncio.ensure_future(one()))
        await asyncio.sleep(0.5)
    await asyncio.sleep(6.0)
    hold.set()
    return list(await asyncio.gather(*tasks))


def proxy_pid() -> int:
    """The process of Serve's HTTP proxy on this node."""
    out = subprocess.run(["pgrep", "-f", "ServeReplica|ProxyActor"], capture_output=True, text=True).stdout.split()
    for pid in out:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"ProxyActor" in f.read():
                return int(pid)
    raise RuntimeError("Serve's proxy process was not found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    import ray
    from ray import serve

    from kame_core.testing.servers import free_port

    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(echo_app(1, 1), route_prefix="/")
        print("admission (2 replicas of one session, a queue of one; 4 clients 0.5 s apart, each holding 6 s):")
        for k, outcome in enumerate(asyncio.run(admission(port))):
            print(f"  client {k}: {outcome}")
        serve.run(echo_app(args.sessions, -1), route_prefix="/")
        proxied, share = run_clients([f"ws://127.0.0.1:{port}/api/chat"] * args.sessions, args.seconds,
                                      proxy_pid())
    finally:
        serve.shutdown()
        ray.shutdown()
    replica_ports, door_port = [free_port(), free_port()], free_port()
    started = [start_role("--role", "replicas", *map(str, replica_ports)),
               start_role("--role", "door", "--port", str(door_port), "--sessions", str(args.sessions), "--",
                      *map(str, replica_ports))]
    try:
        for p in [*replica_ports, door_port]:
            wait_listening(p)
        ours, door_share = run_clients([f"ws://127.0.0.1:{door_port}/api/chat"] * args.sessions, args.seconds,
                                        started[1].pid)
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(10)
    print(f"\n{args.sessions} sessions, {args.seconds:.0f} s, cores {os.cpu_count()}:")
    rows: list[tuple[str, dict[str, Any], float]] = [("Serve's proxy", proxied, share), ("our door", ours, door_share)]
    for name, seen, cpu in rows:
        lost = seen["sent"] - seen["received"]
        trip = "no round trip" if seen["p50_ms"] is None else \
            f"round trip p50 {seen['p50_ms']:.2f} ms, p99 {seen['p99_ms']:.2f} ms"
        print(f"  {name:<14} CPU {cpu * 1000 / args.sessions:5.2f} ms/session-s ({100 * cpu:3.0f} % of a core); "
              f"{trip}; lost {lost}; failed sessions {seen['failed']} {seen['first_failure']}")
    print("  (the round trips include the replicas: Serve's are FastAPI websockets behind the proxy, the door's plain "
          "websocket servers; the CPU is the proxy's or the door's process alone)")


if __name__ == "__main__":
    main()
