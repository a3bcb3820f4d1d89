"""Several doors in front of the same replicas (issue 47, item 2): the claim of a slot is made at the replica, which
admits atomically, so N doors never admit past a replica's limit, and a door whose view is stale tries the next
replica instead of refusing a client that another replica has room for. Real servers (the test doubles' stack) as
the replicas, real doors (the ingress app under uvicorn), real websocket clients; no Ray."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kame_core.access import Access
from kame_core.serve import ChatServer, standalone_app
from kame_core.serve import protocol as P
from kame_core.serve.ingress import Ingress, ReplicaLink, ingress_app
from kame_core.testing.servers import replica_server, serving

websockets = pytest.importorskip("websockets")
TOKEN = "replicas-only"


@dataclass
class LocalLink:
    """A door's line to a replica served in this process: its readiness, as a Serve handle's ``status`` gives it
    (``stale_free``: a door whose view of it is out of date, always told that many free slots)."""

    index: int
    chat: ChatServer
    address: str
    stale_free: int | None = None

    async def status(self) -> dict[str, Any]:
        _, body = self.chat.readiness()
        if self.stale_free is not None:
            body = {**body, "ready": True, "free_slots": self.stale_free, "active": 0}
        return {**body, "replica": self.index, "address": self.address}

    async def metrics(self) -> str:
        return ""

    async def stop(self) -> bool:
        return True


@contextlib.contextmanager
def _replicas(tmp_path: Path) -> Iterator[list[tuple[ChatServer, str]]]:
    with contextlib.ExitStack() as stack:
        served = []
        for k in range(2):
            chat = replica_server(tmp_path / f"replica-{k}", TOKEN)
            port = stack.enter_context(serving(standalone_app(chat), chat=chat))
            served.append((chat, f"127.0.0.1:{port}"))
        yield served


def _door(links: list[ReplicaLink]) -> Ingress:
    return Ingress(links, token=TOKEN, access=Access().bound_to("127.0.0.1"))


async def _first(port: int, hold: asyncio.Event) -> int | str:
    """Connect through the door at ``port``: ``"admitted"`` once the replica's handshake came (the session is held
    until ``hold`` is set), else the close code."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat") as ws:
        try:
            first = await asyncio.wait_for(ws.recv(), 20)
        except websockets.ConnectionClosed:
            return ws.close_code
        assert first == P.message(P.HANDSHAKE)
        await hold.wait()
        return "admitted"


def test_two_doors_in_front_of_two_one_session_replicas_admit_two_of_four_clients(tmp_path: Path) -> None:
    with _replicas(tmp_path) as replicas:
        links: list[list[ReplicaLink]] = [[LocalLink(k, chat, address) for k, (chat, address) in enumerate(replicas)]
                                          for _ in range(2)]
        with serving(ingress_app(_door(links[0]))) as door_a, serving(ingress_app(_door(links[1]))) as door_b:
            async def four() -> list[int | str]:
                hold = asyncio.Event()
                tasks = [asyncio.ensure_future(_first(port, hold)) for port in (door_a, door_b, door_a, door_b)]
                while sum(t.done() for t in tasks) < 2:  # the refused ones end; the admitted are held
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)
                assert sum(chat.active for chat, _ in replicas) == 2  # never past a replica's limit
                hold.set()
                return list(await asyncio.gather(*tasks))

            outcomes = asyncio.run(four())
    assert sorted(map(str, outcomes)) == ["1013", "1013", "admitted", "admitted"], outcomes


def test_a_door_whose_view_is_stale_tries_the_next_replica_instead_of_refusing(tmp_path: Path) -> None:
    """Door B believes replica 0 is free (another door filled it since): the replica refuses the claim, and door B
    takes the client to replica 1, which has room (it used to pass replica 0's 1013 on to the client)."""
    with _replicas(tmp_path) as replicas:
        (chat_0, address_0), (chat_1, address_1) = replicas
        door_a = _door([LocalLink(0, chat_0, address_0)])
        door_b = _door([LocalLink(0, chat_0, address_0, stale_free=1), LocalLink(1, chat_1, address_1)])
        with serving(ingress_app(door_a)) as port_a, serving(ingress_app(door_b)) as port_b:
            async def two() -> list[int | str]:
                hold = asyncio.Event()
                first = asyncio.ensure_future(_first(port_a, hold))
                while chat_0.active == 0 and not first.done():
                    await asyncio.sleep(0.05)
                second = asyncio.ensure_future(_first(port_b, hold))
                while chat_1.active == 0 and not second.done():
                    await asyncio.sleep(0.05)
                hold.set()
                return [await first, await second]

            assert asyncio.run(two()) == ["admitted", "admitted"]
        assert door_b.registry.get_sample_value("kame_ingress_refused_total", {"why": "replica full"}) == 1.0


@dataclass
class CountedLink:
    """A replica's line that says it is ready and counts the stops it was sent."""

    index: int
    stops: list[int]

    async def status(self) -> dict[str, Any]:
        return {"ready": True, "free_slots": 1, "active": 0, "address": f"127.0.0.1:{9000 + self.index}"}

    async def metrics(self) -> str:
        return ""

    async def stop(self) -> bool:
        self.stops.append(self.index)
        return True


def test_a_joined_door_follows_the_replicas_running_and_never_stops_them() -> None:
    """``serve --door-only``: replicas the first door adds get this door's sessions too, removed ones none (once
    none of its sessions is on them), and its shutdown leaves them running; the first door's stops its own."""
    stops: list[int] = []
    links = [CountedLink(0, stops), CountedLink(1, stops)]
    running: list[ReplicaLink] = [links[0]]

    async def follow() -> list[ReplicaLink]:
        return list(running)

    async def scenario() -> tuple[list[int], list[int], list[int], bool]:
        joined = Ingress([links[0]], token=TOKEN, owns_replicas=False, follow=follow, follow_every_s=0.02)
        joined.start_scaling()
        running.append(links[1])  # the first door added replica 1
        await asyncio.sleep(0.1)
        grown = [link.index for link in joined.links]
        joined._routed[0] += 1  # a session of this door on replica 0
        running.remove(links[0])  # the first door removed replica 0
        await asyncio.sleep(0.1)
        kept = [link.index for link in joined.links]  # not while its session runs
        joined._routed[0] -= 1
        await asyncio.sleep(0.1)
        shrunk = [link.index for link in joined.links]
        drained = await joined.drain(1.0)
        return grown, kept, shrunk, drained

    grown, kept, shrunk, drained = asyncio.run(scenario())
    assert (grown, kept, shrunk) == ([0, 1], [0, 1], [1])
    assert drained and stops == []  # the replicas are the first door's
    owner = Ingress(list(links), token=TOKEN)
    assert asyncio.run(owner.drain(1.0)) and sorted(stops) == [0, 1]
