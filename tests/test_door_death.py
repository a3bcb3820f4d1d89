"""A door that dies (issue 47, item 3): its replica sees the lost peer at once and saves the session, which its
owner (the page's claim) can open; and the Python client takes a new session to another door when the first is
gone. A real replica (the test doubles' stack) in this process, the door in a process of its own, SIGKILLed."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kame_core.serve import protocol as P
from kame_core.serve import standalone_app
from kame_core.serve.client import talk
from kame_core.session import SessionStore
from kame_core.testing.doubles import tone
from kame_core.testing.servers import free_port, listens, replica_server, serving, wait_for_process
from kame_core.testing.waiting import wait_until

websockets = pytest.importorskip("websockets")
TOKEN = "replicas-only"
REPO = Path(__file__).resolve().parent.parent

#: a door in a process of its own, in front of one replica (argv: its port, the replica's address, their token)
DOOR = textwrap.dedent("""
    import sys
    import uvicorn
    from kame_core.access import Access
    from kame_core.serve.http import uvicorn_options
    from kame_core.serve.ingress import Ingress, ingress_app
    from kame_core.serve.protocol import Limits

    class Link:
        index = 0
        async def status(self):
            return {"ready": True, "free_slots": 1, "active": 0, "address": sys.argv[2]}
        async def metrics(self):
            return ""
        async def stop(self):
            return True

    class Sessions:
        max_sessions, limits = 1, Limits()

    ingress = Ingress([Link()], token=sys.argv[3], access=Access().bound_to("127.0.0.1"))
    uvicorn.run(ingress_app(ingress), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                **uvicorn_options(Sessions()))
""")


def _door(port: int, replica: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        door = subprocess.Popen([sys.executable, "-c", DOOR, str(port), replica, TOKEN], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wait_for_process(door, lambda: listens(port), timeout_s=30, what="the door", log=log)
    return door


@pytest.mark.slow  # a door process started (imports: ~2 s) and killed mid-session, on the wall clock
def test_a_killed_doors_session_is_saved_by_its_replica_at_once_and_opens_for_its_owner(tmp_path: Path) -> None:
    chat = replica_server(tmp_path / "replica", TOKEN)
    claim = "c" * 43
    with serving(standalone_app(chat), chat=chat) as replica_port:
        door_port = free_port()
        door = _door(door_port, f"127.0.0.1:{replica_port}", tmp_path / "door.log")

        async def talk_until_killed() -> tuple[str, float]:
            async with websockets.connect(f"ws://127.0.0.1:{door_port}/api/chat?claim={claim}") as ws:
                assert await ws.recv() == P.message(P.HANDSHAKE)
                session_id = ""
                start = time.monotonic()
                frame = tone(0.08)
                for i in range(25):  # 2 s of audio in real time
                    await ws.send(P.message(P.PCM, P.pcm_to_bytes(frame)))
                    while not session_id:
                        got = await ws.recv()
                        if isinstance(got, bytes) and got[0] == P.EVENT and b'"type":"session"' in got:
                            import json

                            session_id = json.loads(got[1:])["id"]
                    await asyncio.sleep(max(0.0, start + (i + 1) * 0.08 - time.monotonic()))
                assert chat.active == 1
                door.send_signal(signal.SIGKILL)
                killed = time.monotonic()
                with pytest.raises(websockets.ConnectionClosed):
                    while True:
                        await ws.recv()
                return session_id, killed

        try:
            session_id, killed = asyncio.run(talk_until_killed())
        finally:
            door.kill()
            door.wait(10)
        wait_until(lambda: len(chat.results) == 1, 5, what="the replica to end the session")
        noticed = time.monotonic() - killed
        [ended] = chat.results
    assert ended.reason == "client disconnected" and ended.path is not None and ended.frames > 0
    assert noticed < 2.0, f"the replica saved the session {noticed:.2f} s after its door died"
    store = SessionStore(tmp_path / "replica")
    assert store.owns(session_id, claim) and not store.owns(session_id, "x" * 43)


def test_the_client_takes_a_new_session_to_the_next_door_when_the_first_is_gone(tmp_path: Path) -> None:
    chat = replica_server(tmp_path / "replica", TOKEN)
    with serving(standalone_app(chat), chat=chat) as port:
        gone = f"ws://127.0.0.1:{free_port()}/api/chat"  # nothing listens there (a door that died)
        here = f"ws://127.0.0.1:{port}/api/chat?token={TOKEN}"
        result = asyncio.run(talk([gone, here], np.zeros(2400, np.float32), tail_s=0.3, pcm=True))
    assert result.url == here and result.close_code == P.CLOSE_NORMAL
    [(passed, why)] = result.passed_over
    assert passed == gone and "ConnectionRefused" in why
    with pytest.raises(OSError):
        asyncio.run(talk([gone], np.zeros(2400, np.float32), tail_s=0.1))  # the last one's refusal, as it came
