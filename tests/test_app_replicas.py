"""The app with ``KAME_REPLICAS=2``: its ``/api/chat`` is the door of two replicas of its live server (the CPU
stack: faster-whisper, the stand-in, Piper) on a local Ray Serve. A Talk page's ticket admits a conversation
through the app's own port despite the token; the session is served and saved by a replica, in its folder
``replica-K`` under ``KAME_SESSIONS_DIR``, and the Talk tab opens it from there with the page's claim; ``/readyz``
lists both replicas; a shutdown deletes the replicas and the Ray the app started."""
from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.serve import notices as N
from kame_core.serve import protocol as P
from kame_core.settings import Settings
from kame_core.testing.servers import serving

websockets = pytest.importorskip("websockets")
pytestmark = pytest.mark.slow

CHUNK_S = 0.08
CLAIM = "5e" * 32


async def _talk(url: str, seconds: float) -> tuple[dict[str, Any], list[dict[str, Any]], int | None]:
    """Stream a tone in real time for ``seconds``, end, read to the close: the session notice, every event, the
    close code."""
    t = np.arange(int(CHUNK_S * SAMPLE_RATE)) / SAMPLE_RATE
    chunk = P.message(P.PCM, P.pcm_to_bytes(0.2 * np.sin(2 * np.pi * 220 * t)))
    events: list[dict[str, Any]] = []
    async with websockets.connect(url, max_size=None) as ws:
        assert await asyncio.wait_for(ws.recv(), 120) == bytes([P.HANDSHAKE])

        async def read() -> None:
            try:
                async for data in ws:
                    if isinstance(data, bytes) and data[:1] == bytes([P.EVENT]):
                        events.append(json.loads(data[1:]))
            except websockets.ConnectionClosed:
                pass

        reader = asyncio.ensure_future(read())
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await ws.send(chunk)
            await asyncio.sleep(CHUNK_S)
        await ws.send(P.notice(N.End()))
        await asyncio.wait_for(reader, 120)
        code = ws.close_code
    session = next(e for e in events if e.get("type") == "session")
    return session, events, code


def test_the_apps_talk_runs_on_replicas_behind_its_own_port(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.serve")
    from demo.app.page import build_app
    from demo.app.server import chat_server, create_app
    from demo.open import views
    from kame_core.executors.ray_executor import RAY_WORKER_NICENESS
    from kame_core.serve.replicas import ReplicatedChat, replica_dir

    settings = Settings.from_env({"KAME_REPLICAS": "2", "KAME_MAX_SESSIONS": "1", "KAME_SMALL_MODEL": "0",
                                  "KAME_SESSIONS_DIR": str(tmp_path), "KAME_TOKEN": "s3cret"})
    chat = chat_server(settings, "127.0.0.1")
    assert isinstance(chat, ReplicatedChat) and chat.max_sessions == 2
    blocks = build_app(settings=settings, tickets=chat.tickets).queue()
    monkeypatch.delenv(RAY_WORKER_NICENESS, raising=False)  # put back as it was after the test
    try:
        chat.preload()
        assert os.environ[RAY_WORKER_NICENESS] == "0", "the app's local Ray runs its replicas in real time, as serve's"
        with serving(create_app(blocks, chat), log_level="warning") as port:
            base = f"127.0.0.1:{port}"
            with urllib.request.urlopen(f"http://{base}/readyz", timeout=30) as reply:
                ready = json.loads(reply.read())
            assert ready["ready"] is True and [r["replica"] for r in ready["replicas"]] == [0, 1], ready
            url = f"ws://{base}/api/chat?audio=pcm&claim={CLAIM}&ticket={chat.tickets.issue('page-1')}"
            session, events, code = asyncio.run(_talk(url, 2.0))
        assert code == P.CLOSE_NORMAL, events
        saved = [e for e in events if e.get("type") == "saved"]
        assert session["replica"] in (0, 1) and saved and saved[-1]["file"], events
        folder = replica_dir(tmp_path, session["replica"])
        assert (folder / f"{session['id']}.kame").is_file() and not (tmp_path / f"{session['id']}.kame").exists()
        opened = views.open_talk_session(f"{session['id']} {CLAIM}", None, sessions_dir=tmp_path)
        assert opened.file is not None and opened.session.loaded.origin == "live", opened.status
    finally:
        chat.close()
    import ray

    assert not ray.is_initialized()  # the app's local Ray went with its replicas
