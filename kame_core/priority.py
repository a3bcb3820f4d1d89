"""Live sessions on a shared CPU: work that may lag (Whisper decodes, the oracle LLM) gives way to the 80 ms frames,
which may not: nicer threads (Linux: a thread is a task with a niceness of its own; elsewhere nothing changes), and
fewer of them.

Measured on 2 cores (``benchmarks/live_talk.py --weights random:tiny --stagger-s 0.029 --tail-s 20``, two rounds
of N = 3 and 4, the oracle LLM in a process of its own): Whisper with 1 thread at niceness 4 missed 0 / 0 % of the
frames at N = 3 and 0.45 / 0.71 % at N = 4, words heard 315-543 ms after they were said (median); at niceness 0,
1.9 / 1.1 % and 3.0 / 0.9 %; at niceness 2, 0.7 / 0 % and 0.6 / 0.9 %. With 2 threads at niceness 10 the frames
held to N = 6 but Whisper starved (words 2.9 s late, 31 never heard): its two threads wait for each other on a busy
CPU.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: how much nicer a live server's shared Whisper runs than its frames (a niceness-4 task gets ~30 % of a core a
#: niceness-0 task also wants); the offline oracle LLM's process runs nicer still (10): the STT feeds it
STT_NICENESS = 4


def stt_threads_beside_frames(cores: int | None = None) -> int:
    """Threads for a live server's Whisper on a CPU of ``cores`` (default: this one's): half of them, at most 4,
    at least 1; the frames keep the rest."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


def lower_thread_priority(niceness: int) -> None:
    """Make the calling thread ``niceness`` nicer (at most 19); nothing where that is not possible."""
    if niceness <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
    except OSError:  # not permitted here: run at the normal priority
        pass


def built_nicer(build: Callable[[], T], niceness: int) -> T:
    """``build()`` run in a thread ``niceness`` nicer than this one, so the threads it starts (CTranslate2's
    workers, their OpenMP pools) inherit that priority; its result, or its exception."""
    if niceness <= 0:
        return build()
    box: dict[str, object] = {}

    def run() -> None:
        lower_thread_priority(niceness)
        try:
            box["value"] = build()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="kame-nicer-build")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
