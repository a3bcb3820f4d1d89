"""``python -m kame_core.serve --replicas 2 --max-sessions 1`` as the command builds it: two replicas of the CPU
stack (faster-whisper, the stand-in, Piper) on a local Ray Serve behind the ingress, one Ray start for the
module. Two clients at once land on the two replicas, a third is refused with 1013; a replica process killed
mid-session closes its client with a reason, the other replica goes on serving, and Ray restarts the dead one,
which recovers the session from its journal. The cheap checks (settings, options, the merged metrics, Ray never
imported on the single-server path) run without Ray."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.datastructures import QueryParams

from kame_core.access import Access
from kame_core.clock import SAMPLE_RATE
from kame_core.executors.ray_executor import RAY_WORKER_NICENESS
from kame_core.serve import Limits
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.serve.ingress import Ingress, ingress_app, merge_metrics
from kame_core.serve.metrics import ServerMetrics
from kame_core.serve.replicas import ReplicaSpec, ReplicatedChat, replica_dir
from kame_core.settings import Settings, SettingsError
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import serving
from tests.shared_data import REPO

websockets = pytest.importorskip("websockets")

CHUNK_S = 0.08
#: a page's claim (128 bits, hex): the one that made a session opens it, after a crash too
CLAIM = "0123456789abcdef" * 4


# ------------------------------------------------------------------------------------------------ without Ray
def test_kame_replicas_is_parsed_and_checked() -> None:
    assert Settings.from_env({}).server.replicas == 0
    assert Settings.from_env({"KAME_REPLICAS": "3"}).server.replicas == 3
    for bad in ("-1", "two", "100000"):
        with pytest.raises(SettingsError, match=f"KAME_REPLICAS must be .*'{bad}'"):
            Settings.from_env({"KAME_REPLICAS": bad})


def test_kame_max_replicas_is_parsed_checked_and_given_to_the_apps_door() -> None:
    from demo.app.server import chat_server

    assert Settings.from_env({}).server.max_replicas == 0
    assert Settings.from_env({"KAME_REPLICAS": "1", "KAME_MAX_REPLICAS": "4"}).server.max_replicas == 4
    with pytest.raises(SettingsError, match=r"KAME_MAX_REPLICAS \(2\) is below KAME_REPLICAS \(3\)"):
        Settings.from_env({"KAME_REPLICAS": "3", "KAME_MAX_REPLICAS": "2"})
    with pytest.raises(SettingsError, match="KAME_MAX_REPLICAS must be"):
        Settings.from_env({"KAME_MAX_REPLICAS": "-1"})
    door = chat_server(Settings.from_env({"KAME_REPLICAS": "1", "KAME_MAX_REPLICAS": "3", "KAME_MAX_SESSIONS": "2"}))
    assert isinstance(door, ReplicatedChat) and door.scaling is not None  # nothing starts before preload
    assert (door.scaling.min_replicas, door.scaling.max_replicas, door.scaling.wanted_free) == (1, 3, 2)
    assert door.max_sessions == 6
    fixed = chat_server(Settings.from_env({"KAME_REPLICAS": "2", "KAME_MAX_REPLICAS": "2"}))
    assert isinstance(fixed, ReplicatedChat) and fixed.scaling is None
    with pytest.raises(ValueError, match="never full"):
        chat_server(Settings.from_env({"KAME_REPLICAS": "1", "KAME_MAX_REPLICAS": "2", "KAME_MAX_SESSIONS": "0"}))


def test_ray_options_need_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    from kame_core.serve.__main__ import main

    for argv in (["--ray-address", "auto"], ["--gpus-per-replica", "1"], ["--replicas", "-2"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "--replicas" in capsys.readouterr().err


def test_scaling_options_are_checked_before_anything_loads(capsys: pytest.CaptureFixture[str]) -> None:
    from kame_core.serve.__main__ import main

    cases = [(["--max-replicas", "3"], "need --replicas N"),
             (["--headroom", "2"], "need --replicas N"),
             (["--replicas", "2", "--max-replicas", "1"], "--max-replicas 1: a whole number from --replicas (2)"),
             (["--replicas", "2", "--max-replicas", "100000"], "--max-replicas 100000"),
             (["--replicas", "1", "--max-replicas", "2", "--max-sessions", "0"], "never full"),
             (["--replicas", "1", "--max-replicas", "2", "--headroom", "0"], "headroom 0"),
             (["--replicas", "1", "--max-replicas", "2", "--grow-after-s", "nan"], "grow_after_s nan"),
             (["--replicas", "1", "--max-replicas", "2", "--shrink-after-s", "-5"], "shrink_after_s -5")]
    for argv, why in cases:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
        assert why in capsys.readouterr().err, argv


def test_the_single_server_path_never_imports_ray() -> None:
    code = ("import sys, kame_core.serve.__main__, kame_core.serve.ingress, kame_core.serve.replicas; "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_replica_metrics_merge_into_one_exposition_labelled_by_replica() -> None:
    first, second = ServerMetrics(), ServerMetrics()
    first.started.inc()
    second.started.inc(2)
    second.refused.labels("pool full").inc()
    text = merge_metrics({0: first.exposition().decode(), 1: second.exposition().decode()}).decode()
    assert text.count("# TYPE kame_sessions_started_total counter") == 1
    assert 'kame_sessions_started_total{replica="0"} 1.0' in text
    assert 'kame_sessions_started_total{replica="1"} 2.0' in text
    assert 'kame_sessions_refused_total{replica="1",why="pool full"} 1.0' in text


class _StalledClient:
    """A door's client that takes two messages, then cannot be written to (it stopped reading and its
    connection was dropped), and never sends anything."""

    query_params = QueryParams("audio=pcm")

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.closed: tuple[int, str] | None = None

    async def send_bytes(self, data: bytes) -> None:
        if len(self.got) >= 2:
            raise ConnectionResetError("the client stopped reading")
        self.got.append(data)

    async def send_text(self, data: str) -> None:
        await self.send_bytes(data.encode())

    async def receive(self) -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "websocket.disconnect"}

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


def test_a_client_that_stops_taking_messages_frees_its_slot_and_is_not_a_lost_replica() -> None:
    """An attacker's client through the door: it stops taking messages. The door pumps a replica (here a websocket
    server streaming audio) to it until a send fails, then ends at once, closes the replica's side (the replica
    then ends and saves the session), gives the slot back, and counts no replica as lost."""

    async def scenario() -> tuple[_StalledClient, float, bool, str]:
        replica_saw_close = asyncio.Event()

        async def replica(ws: Any) -> None:
            try:
                while True:
                    await ws.send(b"\x01" + b"\0" * 960)
                    await asyncio.sleep(0.01)
            except websockets.ConnectionClosed:
                replica_saw_close.set()

        async with websockets.serve(replica, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            ingress = Ingress([], "replicas-token")
            ingress._routed[0] = 1  # the slot the door reserved for this client
            client = _StalledClient()
            started = time.monotonic()
            try:
                await asyncio.wait_for(ingress._pump(client, 0, f"127.0.0.1:{port}"), 10)
            finally:
                ingress._routed[0] -= 1  # as handle() does
            took = time.monotonic() - started
            await asyncio.wait_for(replica_saw_close.wait(), 10)
            metrics = (await ingress.metrics_text()).decode()
        return client, took, replica_saw_close.is_set(), metrics

    client, took, replica_closed, metrics = asyncio.run(scenario())
    assert len(client.got) == 2 and took < 5 and replica_closed
    assert "kame_ingress_replica_lost_total{" not in metrics, metrics


# ------------------------------------------------------------------------------------------------ on Ray Serve
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(ingress address, the ingress, the replicas' sessions folder): 2 replicas of 1 session each."""
    pytest.importorskip("ray.serve")
    folder = tmp_path_factory.mktemp("sessions")
    spec = ReplicaSpec(stack_from_cpu(small_model_openers=False), sessions_dir=folder, max_sessions=1,
                       limits=Limits(max_session_s=60), journal_every_s=0.2)
    door = ReplicatedChat(spec, 2, access=Access().bound_to("127.0.0.1"))
    try:
        with pytest.MonkeyPatch.context() as env:  # as the command starts a local Ray: replicas at niceness 0
            env.setenv(RAY_WORKER_NICENESS, "0")
            ingress = door.preload()
        assert door.max_sessions == 2 and door.preload() is ingress  # started once
        with serving(ingress_app(ingress), log_level="warning") as port:
            yield f"127.0.0.1:{port}", ingress, folder
    finally:
        door.close()


class Client:
    """A protocol client streaming a tone as raw PCM in real time until told to end; what it received."""

    def __init__(self, address: str, claim: str = "") -> None:
        self.url = f"ws://{address}/api/chat?audio=pcm" + (f"&claim={claim}" if claim else "")
        self.session: dict[str, Any] = {}
        self.messages: list[dict[str, Any]] = []
        self.code: int | None = None
        self.reason = ""
        self.started = asyncio.Event()
        self.stop = asyncio.Event()

    async def run(self, seconds: float = 30.0) -> Client:
        t = np.arange(int(CHUNK_S * SAMPLE_RATE)) / SAMPLE_RATE
        chunk = P.message(P.PCM, P.pcm_to_bytes(0.2 * np.sin(2 * np.pi * 220 * t)))
        async with websockets.connect(self.url, max_size=None) as ws:
            try:
                assert await asyncio.wait_for(ws.recv(), 60) == bytes([P.HANDSHAKE])
                reader = asyncio.ensure_future(self._read(ws))
                deadline = time.monotonic() + seconds
                while not self.stop.is_set() and time.monotonic() < deadline:
                    await ws.send(chunk)
                    await asyncio.sleep(CHUNK_S)
                await ws.send(P.notice(N.End()))
                await asyncio.wait_for(reader, 60)
            except websockets.ConnectionClosed:
                pass
            self.code, self.reason = ws.close_code, ws.close_reason or ""
        return self

    async def _read(self, ws: Any) -> None:
        try:
            async for data in ws:
                if isinstance(data, bytes) and data[:1] == bytes([P.EVENT]):
                    message = json.loads(data[1:])
                    self.messages.append(message)
                    if message.get("type") == "session":
                        self.session = message
                        self.started.set()
        except websockets.ConnectionClosed:
            pass

    def saved(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == "saved"]


async def _refused(address: str) -> tuple[int | None, str]:
    async with websockets.connect(f"ws://{address}/api/chat") as ws:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)
        return ws.close_code, ws.close_reason or ""


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.slow
def test_two_clients_on_two_replicas_and_a_third_is_refused(cluster: Any) -> None:
    address, ingress, _ = cluster

    async def scenario() -> tuple[list[Client], tuple[int | None, str], dict[str, Any], str]:
        clients = [Client(address), Client(address)]
        runs = [asyncio.ensure_future(c.run()) for c in clients]
        await asyncio.wait_for(asyncio.gather(*(c.started.wait() for c in clients)), 60)
        refused = await _refused(address)
        status, body = await asyncio.to_thread(_get, f"http://{address}/readyz")
        assert status == 503, body
        ready = json.loads(body)
        metrics = (await asyncio.to_thread(_get, f"http://{address}/metrics"))[1]
        await asyncio.sleep(1.0)
        for c in clients:
            c.stop.set()
        await asyncio.gather(*runs)
        return clients, refused, ready, metrics

    clients, refused, ready, metrics = asyncio.run(scenario())
    assert sorted(c.session["replica"] for c in clients) == [0, 1]
    code, reason = refused
    assert code == P.CLOSE_TRY_LATER and "every replica is full" in reason and "0 full" in reason \
        and "1 full" in reason, reason
    assert ready["ready"] is False and [r["replica"] for r in ready["replicas"]] == [0, 1]
    assert all(r["active"] == 1 and r["free_slots"] == 0 for r in ready["replicas"]), ready
    assert 'kame_sessions_active{replica="0"} 1.0' in metrics and 'kame_sessions_active{replica="1"} 1.0' in metrics
    assert 'kame_ingress_refused_total{why="every replica full"} 1.0' in metrics
    for c in clients:
        assert c.code == P.CLOSE_NORMAL and c.saved() and c.saved()[-1]["file"], (c.code, c.reason)
    status, body = _get(f"http://{address}/readyz")
    assert status == 200 and json.loads(body)["free_slots"] == 2, body


@pytest.mark.slow
def test_a_second_door_joins_the_running_replicas_and_the_two_never_admit_past_them(cluster: Any) -> None:
    """``serve --door-only --ray-address``: a door of its own in front of the replicas the first door started (it
    finds them on the cluster and learns their token from them). Two clients, one per door, take the two one-session
    replicas; one more at each door is refused with 1013; the joined door stops and leaves the replicas serving."""
    import ray

    address, _, folder = cluster
    joined = ReplicatedChat(ReplicaSpec(stack_from_cpu(small_model_openers=False), sessions_dir=folder,
                                        max_sessions=5), 1, access=Access().bound_to("127.0.0.1"),
                            address=ray.get_runtime_context().gcs_address, join=True)
    try:
        second = joined.preload()
        # sized by what the replicas say (1 session each, 2 of them), not by its own options (5 a replica)
        assert joined.replicas.capacity.sessions_each == 1 and joined.max_sessions == 2
        assert joined.replicas.count == 2 and [link.index for link in second.links] == [0, 1]
        assert joined.replicas.token != joined.spec.token  # the replicas' own, asked of them
        again = joined.replicas.running_links()  # what the joined door asks again and again (Ingress.follow)
        assert all(a is b for a, b in zip(again, second.links, strict=True))
        assert second.follow is not None and not second.owns_replicas
        with serving(ingress_app(second), log_level="warning") as port:
            other = f"127.0.0.1:{port}"

            async def scenario() -> tuple[list[Client], list[tuple[int | None, str]]]:
                clients = [Client(address), Client(other)]
                runs = [asyncio.ensure_future(c.run()) for c in clients]
                await asyncio.wait_for(asyncio.gather(*(c.started.wait() for c in clients)), 60)
                refused = [await _refused(address), await _refused(other)]
                await asyncio.sleep(1.0)  # frames to save
                for c in clients:
                    c.stop.set()
                await asyncio.gather(*runs)
                return clients, refused

            clients, refused = asyncio.run(scenario())
    finally:
        joined.close()
    assert sorted(c.session["replica"] for c in clients) == [0, 1]
    assert [code for code, _ in refused] == [P.CLOSE_TRY_LATER] * 2, refused
    for c in clients:
        assert c.code == P.CLOSE_NORMAL and c.saved() and c.saved()[-1]["file"], (c.code, c.reason)
    status, body = _get(f"http://{address}/readyz")  # the first door's replicas still serve
    assert status == 200 and json.loads(body)["free_slots"] == 2, body


def test_door_only_needs_the_clusters_address_and_does_not_scale(capsys: pytest.CaptureFixture[str]) -> None:
    from kame_core.serve.__main__ import main

    for argv, said in ((["--door-only"], "--door-only needs --ray-address"),
                       (["--door-only", "--ray-address", "auto", "--replicas", "1", "--max-replicas", "2"],
                        "does not add or remove replicas")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_replica_closes_its_client_and_is_restarted_with_its_journal(cluster: Any) -> None:
    address, ingress, folder = cluster

    async def scenario() -> tuple[Client, Client, int]:
        doomed = Client(address, claim=CLAIM)
        run = asyncio.ensure_future(doomed.run())
        await asyncio.wait_for(doomed.started.wait(), 60)
        index = doomed.session["replica"]
        status = await ingress.links[index].status()
        await asyncio.sleep(2.0)  # the journal has frames to recover
        os.kill(status["pid"], signal.SIGKILL)
        await asyncio.wait_for(run, 30)
        survivor = Client(address)  # the other replica keeps serving meanwhile
        survivor_run = asyncio.ensure_future(survivor.run())
        await asyncio.wait_for(survivor.started.wait(), 60)
        await asyncio.sleep(1.0)
        survivor.stop.set()
        await survivor_run
        deadline = time.monotonic() + 120
        while True:  # Ray starts a new process for the dead replica: it loads, recovers and says ready
            try:
                again = await asyncio.wait_for(ingress.links[index].status(), 5)
                if again["pid"] != status["pid"] and again.get("ready"):
                    break
            except Exception:  # noqa: BLE001 - restarting
                pass
            assert time.monotonic() < deadline, "the killed replica was not restarted"
            await asyncio.sleep(0.5)
        return doomed, survivor, index

    from demo.open.views import open_talk_session

    doomed, survivor, index = asyncio.run(scenario())
    assert doomed.code == P.CLOSE_INTERNAL and f"replica {index} stopped mid-session" in doomed.reason, \
        (doomed.code, doomed.reason)
    assert survivor.session["replica"] == 1 - index and survivor.code == P.CLOSE_NORMAL and survivor.saved()
    recovered = replica_dir(Path(folder), index) / f"{doomed.session['id']}.kame"
    assert recovered.exists(), sorted(p.name for p in replica_dir(Path(folder), index).iterdir())
    deadline = time.monotonic() + 15  # the door sees the restarted replica at its next poll ("asked again shortly")
    while True:
        status, body = _get(f"http://{address}/readyz")
        if status == 200 and json.loads(body)["free_slots"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status == 200 and json.loads(body)["free_slots"] == 2, body
    # the page that made it opens it from the sessions folder (the claim travelled with the replica's journal);
    # after /readyz: opening draws the figures, which on 2 cores can delay a replica's answer to the door's poll
    opened = open_talk_session(f"{doomed.session['id']} {CLAIM}", None, sessions_dir=Path(folder))
    assert opened.file is not None, opened.status
    assert open_talk_session(f"{doomed.session['id']} {'e' * 32}", None, sessions_dir=Path(folder)).file is None
