"""The live server on the neural front-end: ``python -m kame_core.serve --weights TINY --device cpu
--pool-size 2`` as a subprocess would build it (the same ``stack_from_cpu`` load), with protocol clients
streaming Piper-spoken questions in real time. The checkpoint is random and tiny: what it says is noise; the
tests check the plumbing (slots, refusals, oracle ids, saving, provenance)."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE
from kame_core.neural.choice import FrontEndChoice
from kame_core.neural.tiny import TINY_LABEL, write_tiny_checkpoint
from kame_core.record.trace import EventKind
from kame_core.scenario import load_scenario
from kame_core.serve import ChatServer, Limits, standalone_app
from kame_core.serve import protocol as P
from kame_core.serve.client import talk
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import free_port, serving
from kame_core.testing.waiting import wait_until
from tests.shared_data import REPO

pytestmark = pytest.mark.slow  # Whisper, SmolLM2, Piper, real time

websockets = pytest.importorskip("websockets")
pytest.importorskip("sphn")

FRANCE = "What is the capital of France?"
SPIDER = "How many legs does a spider have?"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt")


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    """(ws url, ChatServer) on the tiny checkpoint, pool of 2, loaded before it listens."""
    choice = FrontEndChoice(weights=str(tiny), device="cpu", pool_size=2)
    server = ChatServer(stack_from_cpu(small_model_openers=False, front_end=choice), max_sessions=None,
                        sessions_dir=tmp_path_factory.mktemp("sessions"), limits=Limits(max_session_s=60))
    with server.preload().neural, serving(standalone_app(server), log_level="warning") as port:
        yield f"ws://127.0.0.1:{port}/api/chat", server


@pytest.fixture(scope="module")
def questions() -> dict[str, np.ndarray]:
    from kame_core.tts import make_tts

    tts = make_tts("piper")
    return {text: tts.synthesize(text).audio for text in (FRANCE, SPIDER)}


async def _refused(url: str) -> tuple[int | None, str]:
    async with websockets.connect(url) as ws:
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                await asyncio.wait_for(ws.recv(), 20)
        return ws.close_code, ws.close_reason or ""


def test_two_clients_share_one_pool_and_a_third_is_refused(served, questions):
    url, server = served
    before = len(server.results)

    async def scenario():
        a = asyncio.ensure_future(talk(url, questions[FRANCE], tail_s=5.0))
        b = asyncio.ensure_future(talk(url, questions[SPIDER], tail_s=5.0, lead_s=0.3))
        # both hold their slot now
        await asyncio.to_thread(wait_until, lambda: server.active == 2, 30, what="both sessions admitted")
        third = await _refused(url)
        return await a, await b, third

    first, second, third = asyncio.run(scenario())
    assert third[0] == P.CLOSE_TRY_LATER and "all 2 session slots" in third[1]
    slots = set()
    for result, question in ((first, questions[FRANCE]), (second, questions[SPIDER])):
        assert result.first_kind == P.HANDSHAKE and result.close_code == P.CLOSE_NORMAL
        fe = result.session["front_end"]
        assert fe["kind"] == "neural-random" and TINY_LABEL in fe["label"] and fe["pool_size"] == 2
        slots.add(fe["slot"])
        sent_s = len(question) / SAMPLE_RATE + 5.0
        # answered as it streamed: an output frame for (nearly) every input frame (how late each frame was is
        # the benchmark's business: benchmarks/live_talk.py --weights)
        got_s = len(result.output) / SAMPLE_RATE
        assert got_s >= 0.8 * sent_s, f"{got_s:.1f} s of output for {sent_s:.1f} s of input"
        first_audio = min(at for at, _ in result.audio)
        assert first_audio < 2.0, f"the first output came {first_audio:.1f} s after the handshake"
    assert slots == {0, 1}
    wait_until(lambda: len(server.results) >= before + 2, 30, what="both sessions to end on the server")
    for session in server.results[-2:]:
        trace = load_scenario(session.path).runs["kame"]
        assert trace.provenance["front_end"].kind == "neural-random"
        assert TINY_LABEL in trace.provenance["front_end"].label
        resets = [e for e in trace.events if e.kind is EventKind.ORACLE_RESET]
        assert resets, "no oracle from the LLM reached the session"
        fed = [f.oracle for f in trace.frames if f.oracle.token is not None]
        assert any(o.is_start for o in fed) and any(not o.is_start for o in fed)
        # the tiny tokenizer's ids (64 pieces), after the model's start token (its text card, 64)
        assert all(o.token == 64 if o.is_start else 0 <= o.token < 64 for o in fed)
    assert server.preload().neural.free_slots() == 2


def test_a_disconnect_frees_its_slot_within_seconds(served, questions):
    url, server = served
    before = len(server.results)
    result = asyncio.run(talk(url, questions[FRANCE][: SAMPLE_RATE], tail_s=0.5, end=False))
    assert result.session["front_end"]["slot"] in (0, 1)
    wait_until(lambda: len(server.results) > before, 15, what="the session to end after the disconnect")
    wait_until(lambda: server.preload().neural.free_slots() == 2, 5, what="the slot to be freed")
    again = asyncio.run(talk(url, questions[SPIDER][: SAMPLE_RATE], tail_s=0.3))
    assert again.close_code == P.CLOSE_NORMAL and again.saved()["frames"] >= int(1.0 / FRAME_SECONDS)


def test_the_command_refuses_a_folder_without_a_checkpoint(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kame_core.serve", "--weights", str(tmp_path), "--device", "cpu",
                          "--port", str(free_port())], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "checkpoint unavailable" in out.stderr and "model.safetensors" in out.stderr
