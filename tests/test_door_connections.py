"""The connections a server or a door holds follow what its replicas can really take, with room for health checks,
and no websocket leg deflates the protocol's audio (issue 47, item 1)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kame_core.serve import ChatServer, standalone_app
from kame_core.serve import http as serve_http
from kame_core.serve.__main__ import server_from
from kame_core.serve.http import SESSION_HEADROOM, connection_limit, open_file_limit, uvicorn_options
from kame_core.serve.replicas import ReplicaCapacity, ReplicatedChat
from kame_core.stacks.served import served_stack
from kame_core.testing.doubles import echo_stack
from kame_core.testing.servers import serving

NEURAL = ["--weights", "/models/kame", "--device", "cpu"]


def test_a_door_without_a_session_limit_holds_as_many_connections_as_its_replicas_pools_have_slots(tmp_path: Path):
    """``--max-sessions 0`` on replicas with pools: each still takes its pool's slots, so the door must hold that
    many sessions and room for its health checks (it held 256: 45 of 300 clients got 503 beside 512 free slots)."""
    folder = {"KAME_SESSIONS_DIR": str(tmp_path)}
    door = server_from(["--replicas", "2", "--pool-size", "256", "--max-sessions", "0", *NEURAL], folder)[1]
    assert isinstance(door, ReplicatedChat) and door.spec.max_sessions is None and door.spec.pool_size == 256
    assert door.max_sessions == 512
    assert connection_limit(door.max_sessions, fd_limit=1 << 20) == 512 + SESSION_HEADROOM
    stand_in = server_from(["--replicas", "2", "--max-sessions", "0"], folder)[1]
    assert isinstance(stand_in, ReplicatedChat) and stand_in.max_sessions is None  # no pool, no limit: none said


def test_a_joined_door_holds_the_connections_its_replicas_door_set_not_its_own_flags(tmp_path: Path):
    """``serve --door-only`` learns from replica 0 what each replica runs and how many there may be (the first door's
    pool and scaling); its own ``--pool-size`` / ``--replicas`` no longer size it (they had to match, unchecked)."""
    folder = {"KAME_SESSIONS_DIR": str(tmp_path)}
    first = server_from(["--replicas", "2", "--max-replicas", "4", "--pool-size", "32", "--max-sessions", "32",
                         *NEURAL], folder)[1]
    assert isinstance(first, ReplicatedChat) and first.max_sessions == 32 * 4
    said = first.spec.capacity()  # what each of its replicas answers (LiveReplica.capacity)
    assert said == ReplicaCapacity(sessions_each=32, most_replicas=4)
    joined = server_from(["--replicas", "1", "--door-only", "--ray-address", "auto"], folder)[1]
    assert isinstance(joined, ReplicatedChat) and joined.replicas.joined
    assert joined.max_sessions == 2  # its own flags, before it has asked the replicas (the stand-in's default)
    joined.replicas.capacity = said  # as RayReplicas._join sets it from replica 0
    assert joined.max_sessions == 32 * 4 == first.max_sessions
    fixed = server_from(["--replicas", "3", "--max-sessions", "5"], folder)[1]
    assert isinstance(fixed, ReplicatedChat) and fixed.spec.capacity() == ReplicaCapacity(5, 3)


def test_a_low_soft_open_file_limit_is_raised_for_the_connections_wanted(monkeypatch: pytest.MonkeyPatch):
    """8 replicas of 32 sessions: 256 sessions and 64 for health checks. A soft limit of 1024 allowed 256 connections
    (exactly the sessions, no room for ``/readyz``); it is raised within the hard limit, never past it."""
    resource = pytest.importorskip("resource")
    limits = {"soft": 1024, "hard": 1 << 20}
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limits["soft"], limits["hard"]))

    def setrlimit(which: int, wanted: tuple[int, int]) -> None:
        assert wanted[0] <= limits["hard"] and wanted[1] == limits["hard"]
        limits["soft"] = wanted[0]

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    assert connection_limit(8 * 32) == 8 * 32 + SESSION_HEADROOM
    assert limits["soft"] == 4 * (8 * 32 + SESSION_HEADROOM)
    limits.update(soft=1024, hard=1200)
    assert connection_limit(8 * 32) == 1200 // 4  # the hard limit bounds it
    assert open_file_limit(at_least=100) == 1200  # never lowered


def test_a_limit_that_cannot_be_raised_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch, caplog):
    resource = pytest.importorskip("resource")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 1 << 20))

    def refused(which: int, wanted: tuple[int, int]) -> None:
        raise ValueError("not allowed")

    monkeypatch.setattr(resource, "setrlimit", refused)
    assert serve_http.connection_limit(300) == 256
    assert "could not be raised to 1456" in caplog.text


def test_the_server_refuses_per_message_deflate(tmp_path: Path):
    """The protocol's audio is Opus or PCM: deflating it costs CPU on every message and saves nothing."""
    websockets = pytest.importorskip("websockets")
    stack = echo_stack("hello", "hi")
    chat = ChatServer(lambda: served_stack(stack), max_sessions=1, sessions_dir=tmp_path)
    options = uvicorn_options(chat)
    assert options["ws_per_message_deflate"] is False

    async def extensions(port: int) -> str | None:
        async with websockets.connect(f"ws://127.0.0.1:{port}/api/chat") as ws:  # offers permessage-deflate
            return ws.response.headers.get("Sec-WebSocket-Extensions")

    with serving(standalone_app(chat), chat=chat, **options) as port:
        assert asyncio.run(extensions(port)) is None
