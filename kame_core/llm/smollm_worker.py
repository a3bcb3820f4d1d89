"""The SmolLM2 worker process's own side: load the model, say ready, serve JSON lines on stdin / stdout.

:class:`~.smollm_process.SmolLMProcess` starts :func:`main` in a child process and speaks the protocol its module
docstring shows. Generations run in a pool of at most ``--workers`` threads (the parent bounds its requests in
flight the same way; more wait their turn here, never a thread each); pings are answered by the reading thread
at once, so a busy child is told from a hung one. The child ends when its stdin closes.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from ..protocols import ChatMessage

#: generations at once in the child, and requests in flight in the parent (:class:`~.smollm_process.SmolLMProcess`)
MAX_IN_FLIGHT = 8


def serve(commands: IO[str], replies: IO[str], cache_root: Path | None, workers: int = MAX_IN_FLIGHT) -> None:
    """Load the model, say ready, then serve ``commands`` until they end: generations in a pool of ``workers``
    threads, pings answered at once."""
    from . import smollm_model  # the model's own module (importing it starts no worker: no circle)

    lock = threading.Lock()

    def reply(message: dict[str, Any]) -> None:
        with lock:
            replies.write(json.dumps(message) + "\n")
            replies.flush()

    try:
        smollm_model.load_generator(cache_root)
    except Exception as exc:  # noqa: BLE001 - told to the parent, which raises it
        reply({"failed": f"{type(exc).__name__}: {exc}"})
        return
    reply({"ready": True})
    stops: dict[int, threading.Event] = {}

    def run(ident: int, messages: list[ChatMessage], max_new_tokens: int, stop: threading.Event) -> None:
        try:
            if not stop.is_set():  # stopped while it waited its turn: nothing to generate
                smollm_model.generate(messages, max_new_tokens, lambda piece: reply({"id": ident, "piece": piece}),
                                      stop, cache_root)
            reply({"id": ident, "end": True})
        except Exception as exc:  # noqa: BLE001 - the parent raises it in the waiting caller
            reply({"id": ident, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            stops.pop(ident, None)

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="smollm-generate")
    for line in commands:
        command = parse(line)
        ident = command.get("id")
        if not isinstance(ident, int):
            continue
        if command.get("op") == "ping":
            reply({"pong": ident})
        elif command.get("op") == "stop":
            if (stop := stops.get(ident)) is not None:
                stop.set()
        elif command.get("op") == "generate":
            try:
                messages = [_message(item) for item in command.get("messages", [])]
            except (TypeError, ValueError) as exc:
                reply({"id": ident, "error": f"malformed request: {exc}"})
                continue
            stops[ident] = threading.Event()
            pool.submit(run, ident, messages, int(command.get("max_new_tokens", 64)), stops[ident])
    for stop in list(stops.values()):  # the parent is gone: nobody reads the rest
        stop.set()
    pool.shutdown(wait=False, cancel_futures=True)


def parse(line: str) -> dict[str, Any]:
    """One JSON line of the protocol as a dict (an unreadable one as ``{"failed": why}``)."""
    try:
        value = json.loads(line)
    except ValueError:
        return {"failed": f"unreadable line from the worker: {line[:200]!r}"}
    return value if isinstance(value, dict) else {"failed": f"unexpected line from the worker: {line[:200]!r}"}


def _message(item: object) -> ChatMessage:
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
        role, content = item
        if role == "system" or role == "user" or role == "assistant":
            return ChatMessage(role, content)
    raise ValueError(f"not a chat message: {str(item)[:80]}")


def main(argv: Sequence[str] | None = None) -> None:
    """The child's entry point (``python -c``): its niceness and threads, stdout kept for the protocol."""
    import argparse

    parser = argparse.ArgumentParser(description="SmolLM2 worker process (started by SmolLMProcess)")
    parser.add_argument("--niceness", type=int, default=10)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=MAX_IN_FLIGHT)
    parser.add_argument("--cache-root", type=Path)
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr, not into the protocol
    if args.niceness > 0 and hasattr(os, "nice"):
        try:
            os.nice(args.niceness)
        except OSError:
            pass
    # transformers, imported here only to convert the GGUF file the first time, imports scikit-learn when it is
    # installed (assisted generation's ROC curve) and SciPy (object-detection losses): nothing this process runs.
    # Both count as absent here.
    for unused in ("sklearn", "scipy"):
        sys.modules.setdefault(unused, None)  # type: ignore[arg-type]
    if hasattr(signal, "SIGINT"):  # Ctrl-C in a terminal reaches the whole group: the parent decides, stdin ends it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    serve(sys.stdin, replies, args.cache_root, args.workers)


if __name__ == "__main__":
    main()
