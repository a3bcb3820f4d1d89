"""``serve --replicas 1 --max-replicas 2 --max-sessions 1`` on a local Ray Serve, as the command builds it: the
door starts one replica of the CPU stack; a client takes its only slot, the door adds replica 1 and the next
client talks to it; once both have left, the newest replica is removed and the door says so."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from kame_core.access import Access
from kame_core.executors.ray_executor import RAY_WORKER_NICENESS
from kame_core.serve import Limits
from kame_core.serve.ingress import ingress_app
from kame_core.serve.replicas import ReplicaSpec, ReplicatedChat, replica_dir
from kame_core.serve.scaling import ScalingRule
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving
from tests.test_serve_replicas import Client, _get

pytestmark = pytest.mark.slow  # Ray, two replicas of the CPU stack


def test_the_door_adds_a_replica_when_full_and_removes_it_when_idle(tmp_path: Any) -> None:
    pytest.importorskip("ray.serve")
    spec = ReplicaSpec(stack_from_cpu(small_model_openers=False), sessions_dir=tmp_path, max_sessions=1,
                       limits=Limits(max_session_s=120), journal_every_s=0.2)
    rule = ScalingRule(1, 2, 1, grow_after_s=0.0, shrink_after_s=2.0)
    door = ReplicatedChat(spec, 1, access=Access().bound_to("127.0.0.1"), scaling=rule)
    assert door.max_sessions == 2  # what the door lets in at most: every replica it may run
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(RAY_WORKER_NICENESS, "0")
            ingress = door.preload()
        with serving(ingress_app(ingress), log_level="warning") as port:
            address = f"127.0.0.1:{port}"

            async def scenario() -> tuple[Client, Client, dict[str, Any], dict[str, Any], str]:
                first = Client(address)
                first_run = asyncio.ensure_future(first.run(120))
                await asyncio.wait_for(first.started.wait(), 60)
                deadline = time.monotonic() + 180  # the door starts replica 1: it loads the CPU stack
                while len(ingress.links) < 2:
                    assert time.monotonic() < deadline, "no replica was added"
                    await asyncio.sleep(0.5)
                _, grown = await asyncio.to_thread(_get, f"http://{address}/readyz")
                second = Client(address)
                second_run = asyncio.ensure_future(second.run(120))
                await asyncio.wait_for(second.started.wait(), 60)
                await asyncio.sleep(1.0)
                for client in (first, second):
                    client.stop.set()
                await asyncio.gather(first_run, second_run)
                deadline = time.monotonic() + 60
                while True:  # the door stops sending it sessions, then Serve deletes it
                    metrics = (await asyncio.to_thread(_get, f"http://{address}/metrics"))[1]
                    if 'kame_ingress_scaled_total{direction="down"} 1.0' in metrics:
                        break
                    assert time.monotonic() < deadline, "the idle replica was not removed"
                    await asyncio.sleep(0.5)
                _, shrunk = await asyncio.to_thread(_get, f"http://{address}/readyz")
                return first, second, json.loads(grown), json.loads(shrunk), metrics

            first, second, grown, shrunk, metrics = asyncio.run(scenario())
    finally:
        door.close()
    assert first.session["replica"] == 0 and second.session["replica"] == 1
    assert first.saved() and second.saved()  # each replica saved its own conversation
    assert (replica_dir(tmp_path, 1) / f"{second.session['id']}.kame").exists()
    assert [r["replica"] for r in grown["replicas"]] == [0, 1] and grown["scaling"]["max_replicas"] == 2
    assert [r["replica"] for r in shrunk["replicas"]] == [0] and shrunk["ready"] is True
    assert 'kame_ingress_scaled_total{direction="up"} 1.0' in metrics and "kame_ingress_replicas 1.0" in metrics
    assert door.replicas.count == 1 and [link.index for link in door.replicas.links] == [0]
