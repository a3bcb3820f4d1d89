"""SmolLM2 generating in a child process of its own, for live sessions.

Why: :func:`~kame_core.llm.local_smollm._generate` is transformers' Python loop; run in a thread of the live
server it holds the GIL between its many small torch ops, and the session pool's 80 ms steps wait for it. Measured
on 2 cores (``benchmarks/live_talk.py --weights random:tiny --ns 3``, clients in the server's process): 44-57 % of
the frames late with the oracle in a thread at niceness 10, 83 % at niceness 0, 1.3 % with a stub writing the
oracle's text instead; in this process, 2-4 %. A niceness does not cure it: the nice thread holds the GIL while the
scheduler keeps it off the CPU. A process has a GIL of its own, and a nice process holds up nobody.

:class:`SmolLMProcess` starts this module's :func:`main` in ``python -c`` with this checkout first on the path (not
``multiprocessing``: its spawn re-imports the caller's main script). The child loads the model, says it is ready,
then serves requests, one thread each, over its stdin / stdout in JSON lines::

    -> {"op": "generate", "id": 7, "messages": [[role, content], ...], "max_new_tokens": 64}
    -> {"op": "stop", "id": 7}
    <- {"ready": true} | {"failed": "why"}                  (once, after loading)
    <- {"id": 7, "piece": "Paris"} ... {"id": 7, "end": true} | {"id": 7, "error": "why"}

:meth:`SmolLMProcess.generate` takes what the in-thread function takes (but the cache root, the child's own),
so :class:`~kame_core.llm.local_smollm.LocalSmolLM` runs either. A child that dies fails the requests it was
serving with :class:`SmolLMProcessError` (the session gets an LLM error and goes on); the next request starts
a new one. The child ends when its stdin closes: with the parent, however the parent goes, or when the
:class:`SmolLMProcess` is closed or dropped.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from ..protocols import ChatMessage, LLMError

#: how long a start may take: converting the GGUF on first use takes ~10-20 s on 2 cores
START_TIMEOUT_S = 180.0
_POLL_S = 0.05


class SmolLMProcessError(LLMError):
    """The SmolLM2 worker process could not start, or died while it was generating."""


class _Mailbox:
    """The requests waiting for replies, each with the child it went to. The reader threads hold this, not the
    :class:`SmolLMProcess`, so dropping the last reference to that ends its child (see :func:`_end`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[subprocess.Popen[str], queue.SimpleQueue[dict[str, Any]]]] = {}

    def deliver(self, reply: dict[str, Any]) -> None:
        with self.lock:
            waiting = self.waiting.get(reply.get("id", -1))  # type: ignore[arg-type]
        if waiting is not None:
            waiting[1].put(reply)

    def fail(self, child: subprocess.Popen[str], why: str) -> None:
        with self.lock:
            stranded = [replies for owner, replies in self.waiting.values() if owner is child]
        for replies in stranded:
            replies.put({"error": why})


class SmolLMProcess:
    """One child process generating with SmolLM2 for every caller of :meth:`generate` (see the module doc).

    ``niceness``: the child's niceness (Linux), so on a busy CPU the oracle waits, not the live frames;
    ``cache_root``: where the converted model is cached (default: the built-in cache root);
    ``torch_threads``: the child's intra-op threads (0: torch's default).
    """

    def __init__(self, cache_root: Path | None = None, *, niceness: int = 10, torch_threads: int = 1) -> None:
        self.cache_root = cache_root
        self.niceness = niceness
        self.torch_threads = torch_threads
        self._start_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._child: subprocess.Popen[str] | None = None
        self._mailbox = _Mailbox()
        self._ids = 0
        self.starts = 0
        self._owner_pid = os.getpid()

    def belongs_here(self) -> bool:
        """Whether this is the process that made the worker: a forked copy (ZeroGPU runs a decorated call in a
        fork) has neither its child nor its reader threads, and generates in a thread of its own instead."""
        return os.getpid() == self._owner_pid

    # -- the parent's side ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the child and wait until its model is loaded (no-op while one runs); raises
        :class:`SmolLMProcessError` with the child's reason."""
        with self._start_lock:
            if self._child is not None and self._child.poll() is None:
                return
            self._child = self._spawn()
            self.starts += 1

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first start or after it ended)."""
        child = self._child
        return child.pid if child is not None and child.poll() is None else None

    def generate(self, messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
                 stop: threading.Event) -> None:
        """Generate in the child, blocking; ``emit`` gets each new piece of text. Returns at the end, or soon
        after ``stop`` is set (the child is told to stop)."""
        self.start()
        child = self._child
        assert child is not None and child.stdin is not None
        with self._mailbox.lock:
            self._ids += 1
            ident = self._ids
            replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
            self._mailbox.waiting[ident] = (child, replies)
        try:
            self._send(child, {"op": "generate", "id": ident, "max_new_tokens": int(max_new_tokens),
                               "messages": [[m.role, m.content] for m in messages]})
            while True:
                if stop.is_set():
                    self._send(child, {"op": "stop", "id": ident}, quiet=True)
                    return
                try:
                    reply = replies.get(timeout=_POLL_S)
                except queue.Empty:
                    if child.poll() is not None and replies.empty():  # died before its reader saw this request
                        raise SmolLMProcessError(f"the SmolLM2 worker process exited (code {child.poll()}) "
                                                 "while generating") from None
                    continue
                if "piece" in reply:
                    emit(str(reply["piece"]))
                elif "end" in reply:
                    return
                else:
                    raise SmolLMProcessError(str(reply.get("error", "the SmolLM2 worker process failed")))
        finally:
            with self._mailbox.lock:
                self._mailbox.waiting.pop(ident, None)

    def close(self) -> None:
        """End the child (its stdin closes, then a kill after 5 s); a later :meth:`generate` starts another."""
        with self._start_lock:
            child, self._child = self._child, None
        if child is None:
            return
        _end(child)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _spawn(self) -> subprocess.Popen[str]:
        package_root = str(Path(__file__).resolve().parents[2])  # this very kame_core, whatever the cwd holds
        boot = f"import sys; sys.path.insert(0, {package_root!r}); from {__name__} import main; main()"
        argv = [sys.executable, "-c", boot, "--niceness", str(self.niceness),
                "--torch-threads", str(self.torch_threads)]
        if self.cache_root is not None:
            argv += ["--cache-root", str(self.cache_root)]
        try:
            child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True,
                                     bufsize=1, close_fds=True)
        except OSError as exc:
            raise SmolLMProcessError(f"could not start the SmolLM2 worker process: {exc}") from exc
        assert child.stdout is not None
        first: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=_read, args=(child, first, self._mailbox), name="smollm-process-reader",
                         daemon=True).start()
        weakref.finalize(self, _end, child)  # the last reference gone (a stack dropped): the child goes too
        try:
            line = first.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            child.kill()
            raise SmolLMProcessError(f"the SmolLM2 worker process was not ready within {START_TIMEOUT_S:.0f} s") \
                from None
        hello = _parse(line) if line else {}
        if not hello.get("ready"):
            child.kill()
            why = hello.get("failed") or f"it exited with code {child.wait()}"
            raise SmolLMProcessError(f"the SmolLM2 worker process did not start: {why}")
        return child

    def _send(self, child: subprocess.Popen[str], message: dict[str, Any], *, quiet: bool = False) -> None:
        assert child.stdin is not None
        try:
            with self._send_lock:
                child.stdin.write(json.dumps(message) + "\n")
                child.stdin.flush()
        except (OSError, ValueError) as exc:  # a closed pipe: the child is gone
            if not quiet:
                raise SmolLMProcessError(f"the SmolLM2 worker process is gone (code {child.poll()})") from exc


def _read(child: subprocess.Popen[str], first: queue.SimpleQueue[str], mailbox: _Mailbox) -> None:
    """A child's reader thread: its first line goes to the starter, the rest to their requests; at EOF every
    request still waiting on this child fails."""
    assert child.stdout is not None
    started = False
    for line in child.stdout:
        if not started:
            started = True
            first.put(line)
            continue
        mailbox.deliver(_parse(line))
    if not started:
        first.put("")
        return
    mailbox.fail(child, f"the SmolLM2 worker process exited (code {child.wait()}) while generating")


def _end(child: subprocess.Popen[str]) -> None:
    """Close the child's stdin: it ends (its reader thread sees EOF and ends too)."""
    if child.stdin is not None:
        try:
            child.stdin.close()
        except (OSError, ValueError):
            pass


def _parse(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {"failed": f"unreadable line from the worker: {line[:200]!r}"}
    return value if isinstance(value, dict) else {"failed": f"unexpected line from the worker: {line[:200]!r}"}


# -- the child's side -----------------------------------------------------------------------------------
def serve(commands: IO[str], replies: IO[str], cache_root: Path | None) -> None:
    """Load the model, say ready, then serve ``commands`` until they end (one thread per generation)."""
    from .local_smollm import _generate, load_smollm2

    lock = threading.Lock()

    def reply(message: dict[str, Any]) -> None:
        with lock:
            replies.write(json.dumps(message) + "\n")
            replies.flush()

    try:
        load_smollm2(cache_root)
    except Exception as exc:  # noqa: BLE001 - told to the parent, which raises it
        reply({"failed": f"{type(exc).__name__}: {exc}"})
        return
    reply({"ready": True})
    stops: dict[int, threading.Event] = {}

    def run(ident: int, messages: list[ChatMessage], max_new_tokens: int, stop: threading.Event) -> None:
        try:
            _generate(messages, max_new_tokens, lambda piece: reply({"id": ident, "piece": piece}), stop,
                      cache_root)
            reply({"id": ident, "end": True})
        except Exception as exc:  # noqa: BLE001 - the parent raises it in the waiting caller
            reply({"id": ident, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            stops.pop(ident, None)

    for line in commands:
        command = _parse(line)
        ident = command.get("id")
        if not isinstance(ident, int):
            continue
        if command.get("op") == "stop":
            if (stop := stops.get(ident)) is not None:
                stop.set()
        elif command.get("op") == "generate":
            try:
                messages = [_message(item) for item in command.get("messages", [])]
            except (TypeError, ValueError) as exc:
                reply({"id": ident, "error": f"malformed request: {exc}"})
                continue
            stops[ident] = threading.Event()
            threading.Thread(target=run, args=(ident, messages, int(command.get("max_new_tokens", 64)),
                                               stops[ident]), daemon=True).start()
    for stop in list(stops.values()):  # the parent is gone: nobody reads the rest
        stop.set()


def _message(item: object) -> ChatMessage:
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
        role, content = item
        if role == "system" or role == "user" or role == "assistant":
            return ChatMessage(role, content)
    raise ValueError(f"not a chat message: {str(item)[:80]}")


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="SmolLM2 worker process (started by SmolLMProcess)")
    parser.add_argument("--niceness", type=int, default=10)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--cache-root", type=Path)
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr, not into the protocol
    if args.niceness > 0 and hasattr(os, "nice"):
        try:
            os.nice(args.niceness)
        except OSError:
            pass
    if hasattr(signal, "SIGINT"):  # Ctrl-C in a terminal reaches the whole group: the parent decides, stdin ends it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.torch_threads > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
    serve(sys.stdin, replies, args.cache_root)


if __name__ == "__main__":
    main()
