"""The path of one live frame through the code: how many of the project's functions and files it passes, and how
often it changes thread, from the client's audio message to the wire messages sent back.

A live conversation over the protocol (:class:`kame_core.serve.session.ChatSession`, on an in-memory connection,
the test doubles' stack: scripted STT and LLM, the echo front-end) is run with probes at the points every frame
passes: the client's audio entering the live source (``LiveSource.push``), the frame loop taking it
(``LiveSource.read_frame``), the STT loop and the pipeline handing work to a worker (``clock.compute``), the STT
hearing it, the front-end's step, the trace recording it (``SessionTrace.append_frame``), a wire message made of it
(``protocol.message``), and the message sent (``Connection.send``). At each probe the call stack is read; its frames
in ``kame_core/`` are the path's hops on that thread (the session's start and end are left out). Reported: the
project's functions on the path (distinct, all threads), the files they are in, the threads (a pool's workers are
one) and the thread crossings in the order the frame passes the probes. The same probes run on any version of the
code (``PYTHONPATH=<a checkout> python benchmarks/frame_hops.py``). The figure is the code's shape, not a timing: it
is the same on any machine.

Usage: ``python benchmarks/frame_hops.py [--list]`` (``--list``: every hop, by thread, in order)
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import kame_core
from kame_core.clock import SAMPLE_RATE, RealTimeClock
from kame_core.record.trace import SessionTrace
from kame_core.serve import protocol as P
from kame_core.serve.session import ChatSession
from kame_core.session.sources import LiveSource
from kame_core.stacks.stack import Stack
from kame_core.testing.doubles import EchoFrontEnd, ScriptedLLM, ScriptedSTT, ToneTTS, words_at

CORE = Path(kame_core.__file__).resolve().parent


#: the probes in the order a frame passes them (a probe that is not on a frame's path is never listed)
ORDER = ("client audio into the live source", "the frame loop takes the frame", "the STT loop hands the STT the frame",
         "the STT hears the frame",
         "the pipeline hands the front-end its step", "the front-end's step", "the trace records the frame",
         "a wire message is made of the frame", "the message is sent")
#: work that is not one frame's: the session's start and end
NOT_A_FRAME = frozenset({"on_end", "ended", "_finish", "close"})


def thread_kind(name: str) -> str:
    """A thread's kind: a pool's workers (``asyncio_0``, ``asyncio_1``) are one."""
    return re.sub(r"_\d+$", "", name)


class Probes:
    """The call stacks seen at each probe, by thread kind: each frame in ``kame_core/`` as (file, function)."""

    def __init__(self) -> None:
        self.paths: dict[str, list[tuple[str, str]]] = {}
        self.threads: dict[str, str] = {}  # probe -> the kind of thread it ran on
        self._lock = threading.Lock()

    def seen(self, probe: str, target: Callable[..., Any]) -> None:
        """At ``probe``, about to call ``target``: the stack's frames in the project, then ``target`` itself."""
        stack = [(f.filename, f.name) for f in traceback.extract_stack()[:-2]]
        stack.append((target.__code__.co_filename, target.__name__))
        hops = [(str(Path(file).resolve().relative_to(CORE.parent)), name)
                for file, name in stack if Path(file).resolve().is_relative_to(CORE)]
        if any(name in NOT_A_FRAME for _, name in hops):
            return
        kind = thread_kind(threading.current_thread().name)
        with self._lock:
            path = self.paths.setdefault(kind, [])
            path.extend(hop for hop in hops if hop not in path)
            self.threads.setdefault(probe, kind)

    def wrap(self, owner: Any, attribute: str, probe: str,
             when: Callable[[tuple[Any, ...]], bool] = lambda args: True) -> None:
        """Probe ``owner.attribute`` (for the calls whose arguments ``when`` accepts)."""
        real: Callable[..., Any] = getattr(owner, attribute)
        probes = self

        if asyncio.iscoroutinefunction(real):
            async def probed_async(*args: Any, **kwargs: Any) -> Any:
                if when(args):
                    probes.seen(probe, real)
                return await real(*args, **kwargs)
            setattr(owner, attribute, probed_async)
            return

        def probed(*args: Any, **kwargs: Any) -> Any:
            if when(args):
                probes.seen(probe, real)
            return real(*args, **kwargs)
        setattr(owner, attribute, probed)

    def crossings(self) -> list[str]:
        """The frame's thread changes, in the order it passes the probes."""
        kinds = [self.threads[probe] for probe in ORDER if probe in self.threads]
        return [f"{a} -> {b}" for a, b in zip(kinds, kinds[1:]) if a != b]


class MemoryConnection:
    """A client that sends ``audio`` as raw PCM messages, one 80 ms frame each, then ends the session."""

    def __init__(self, audio: np.ndarray) -> None:
        frame = SAMPLE_RATE * 8 // 100
        self.incoming: list[bytes | str | None] = [P.message(P.PCM, P.pcm_to_bytes(audio[i: i + frame]))
                                                   for i in range(0, len(audio), frame)]
        self.sent = 0

    async def receive(self) -> bytes | str | None:
        await asyncio.sleep(0.08)
        if self.incoming:
            return self.incoming.pop(0)
        return P.message(P.EVENT, b'{"type": "end"}')

    async def send(self, data: bytes) -> None:
        self.sent += 1

    async def close(self, code: int, reason: str) -> None:
        pass


def run(probes: Probes, seconds: float) -> int:
    stack = Stack(make_stt=lambda: ScriptedSTT([words_at("what is the capital of france", 0.2)]),
                  make_front_end=EchoFrontEnd, llm=ScriptedLLM(lambda _: "paris"), tts=ToneTTS())
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    conn = MemoryConnection((0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))  # its messages made unprobed
    probes.wrap(LiveSource, "push", "client audio into the live source")
    probes.wrap(LiveSource, "read_frame", "the frame loop takes the frame")
    probes.wrap(ScriptedSTT, "accept", "the STT hears the frame")
    probes.wrap(RealTimeClock, "compute", "the STT loop hands the STT the frame",
                when=lambda args: isinstance(getattr(args[1], "__self__", None), ScriptedSTT))
    probes.wrap(RealTimeClock, "compute", "the pipeline hands the front-end its step",
                when=lambda args: isinstance(getattr(args[1], "__self__", None), EchoFrontEnd))
    probes.wrap(EchoFrontEnd, "step", "the front-end's step")
    probes.wrap(SessionTrace, "append_frame", "the trace records the frame")
    probes.wrap(P, "message", "a wire message is made of the frame", when=lambda args: args[0] in (P.PCM, P.TEXT))
    probes.wrap(MemoryConnection, "send", "the message is sent")
    with tempfile.TemporaryDirectory() as folder:
        session = ChatSession(lambda clock: stack.runner("kame", clock=clock), Path(folder), pcm_out=True)
        ended = asyncio.run(session.serve(conn))
    return ended.frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="every hop, by thread")
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    probes = Probes()
    frames = run(probes, args.seconds)
    threads = {name: path for name, path in probes.paths.items() if path}
    hops = {hop for path in threads.values() for hop in path}
    files = {file for file, _ in hops}
    print(f"code: {CORE}; frames: {frames}")
    if args.list:
        for name, path in threads.items():
            print(f"\n[{name}] probes: {'; '.join(p for p in ORDER if probes.threads.get(p) == name)}")
            for file, function in path:
                print(f"  {file}:{function}")
    crossings = probes.crossings()
    missing = [probe for probe in ORDER if probe not in probes.threads]
    print(f"\nthe live frame's path: {len(hops)} project functions in {len(files)} files, on {len(threads)} threads "
          f"({', '.join(threads)}); {len(crossings)} thread crossings: {'; '.join(crossings)}")
    if missing:
        print(f"probes never reached: {'; '.join(missing)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
