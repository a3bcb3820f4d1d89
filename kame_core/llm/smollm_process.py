"""SmolLM2 generating in a child process of its own, for live sessions; watched, so a hung child costs answers, never
the session or a server thread.

Why: :func:`~kame_core.llm.smollm_model.generate` is a Python loop over torch ops; run in a thread of the live
server it holds the GIL between its many small torch ops, and the session pool's 80 ms steps wait for it. Measured
on 2 cores (``benchmarks/live_talk.py --weights random:tiny --ns 3``, clients in the server's process): 44-57 % of
the frames late with the oracle in a thread at niceness 10, 83 % at niceness 0, 1.3 % with a stub writing the
oracle's text instead; in this process, 2-4 %. A niceness does not cure it: the nice thread holds the GIL while the
scheduler keeps it off the CPU. A process has a GIL of its own, and a nice process holds up nobody.

:class:`SmolLMProcess` starts :func:`.smollm_worker.main` in ``python -c`` with this checkout first on the path (not
``multiprocessing``: its spawn re-imports the caller's main script). The child loads the model, says it is ready,
then serves requests over its stdin / stdout in JSON lines (:mod:`.smollm_worker`: a pool of generating threads)::

    -> {"op": "generate", "id": 7, "messages": [[role, content], ...], "max_new_tokens": 64}
    -> {"op": "stop", "id": 7}
    -> {"op": "ping", "id": 3}
    <- {"ready": true} | {"failed": "why"}                  (once, after loading)
    <- {"id": 7, "piece": "Paris"} ... {"id": 7, "end": true} | {"id": 7, "error": "why"}
    <- {"pong": 3}

:meth:`SmolLMProcess.generate` takes what the in-thread function takes (but the cache root, the child's own),
so :class:`~kame_core.llm.local_smollm.LocalSmolLM` runs either. Every failure is a :class:`SmolLMProcessError`
(an :class:`~kame_core.protocols.LLMError`: the session's oracle records an ``llm_error`` and goes on):

* **Deadlines.** A request's first piece must come within ``first_token_s`` (default 10 s; each next piece too),
  its whole answer within ``answer_s`` (default 60 s); else the child is told to stop it and the caller gets a
  :class:`SmolLMProcessTimeout` (an :class:`~kame_core.llm.base.LLMTimeout`).
* **A bound.** At most ``max_in_flight`` requests (default 8) at once; one more is refused at once. The child
  generates in as many threads. Nothing a caller sends can block it: one writer thread per child writes its
  stdin from a bounded queue, and a request that finds the queue full (the child reads nothing) is refused.
* **A watchdog** per child pings it every :data:`HEARTBEAT_S` when the last ping was answered. A child that misses
  the ping's deadline (``first_token_s``: stopped, or hung), exits, or closes its stdout is killed (a stopped one
  too) and replaced, retrying with growing delays if the new one will not start; its requests fail at once.
  Meanwhile :meth:`SmolLMProcess.problem` says "oracle worker not answering" (the live server's ``/readyz`` is 503
  with it), and a request waits for the new child up to its first-token deadline. A child that is merely slow
  answers pings, and only its late requests fail.

The child ends when its stdin closes: with the parent, however the parent goes, or when the :class:`SmolLMProcess`
is closed or dropped (its watchdog kills it if it does not end within 5 s).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..protocols import ChatMessage, LLMError
from . import smollm_worker
from .base import LLMTimeout
from .smollm_worker import MAX_IN_FLIGHT, parse

log = logging.getLogger(__name__)
#: how long a start may take: converting the GGUF on first use takes ~10-20 s on 2 cores
START_TIMEOUT_S = 180.0
#: default deadlines of one request: its first piece (and each next one), its whole answer
FIRST_TOKEN_S = 10.0
ANSWER_S = 60.0
#: how often the watchdog pings an answering child
HEARTBEAT_S = 1.0
#: waits before each new try when a replacement child does not start (the last one repeats)
RESTART_DELAYS_S = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)
NOT_ANSWERING = "oracle worker not answering"
_POLL_S = 0.05


class SmolLMProcessError(LLMError):
    """The SmolLM2 worker process could not start, died or stopped answering, or refused a request."""


class SmolLMProcessTimeout(SmolLMProcessError, LLMTimeout):
    """A request to the SmolLM2 worker process missed its deadline."""


class _Child:
    """One running child and the two threads that talk to it: a writer, the only one to write its stdin, from a
    bounded queue (no caller ever blocks on a full pipe), and a reader of its stdout (replies to the mailbox)."""

    def __init__(self, popen: subprocess.Popen[str], mailbox: _Mailbox, queue_size: int) -> None:
        self.popen = popen
        self._outbox: queue.Queue[str | None] = queue.Queue(queue_size)
        self.hello: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.pong = threading.Event()
        #: its stdout ended (it exited, or closed it)
        self.gone = threading.Event()
        threading.Thread(target=self._write, name="smollm-process-writer", daemon=True).start()
        threading.Thread(target=_read, args=(self, mailbox), name="smollm-process-reader", daemon=True).start()

    def send(self, message: dict[str, Any]) -> bool:
        """Queue ``message`` for the child without waiting; False when the queue is full (it reads nothing)."""
        try:
            self._outbox.put_nowait(json.dumps(message))
        except queue.Full:
            return False
        return True

    def _write(self) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        try:
            while (line := self._outbox.get()) is not None:
                stdin.write(line + "\n")
                stdin.flush()
        except (OSError, ValueError):  # it is gone (a broken pipe): the watchdog sees its stdout end
            pass
        try:
            stdin.close()
        except (OSError, ValueError):  # what was left unwritten: the pipe is closed all the same
            pass

    def finish(self) -> bool:
        """Close its stdin once what is queued is written: it ends. False (and nothing done) when the queue is
        full."""
        try:
            self._outbox.put_nowait(None)
        except queue.Full:
            return False
        return True

    def end(self, grace_s: float) -> None:
        """:meth:`finish`, and reap it; killed after ``grace_s`` (or at once when it reads nothing)."""
        if not self.finish():
            self.kill()
            return
        try:
            self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Kill it (a stopped one too) and reap it; its writer ends."""
        self.popen.kill()
        self.popen.wait()
        try:
            self._outbox.put_nowait(None)  # a writer waiting for work ends; a writing one meets the broken pipe
        except queue.Full:
            pass


class _Mailbox:
    """The requests waiting for replies, each with the child it went to. Threads hold this (and the
    :class:`_Supervisor`), not the :class:`SmolLMProcess`, so dropping that ends its child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[_Child, queue.SimpleQueue[dict[str, Any]]]] = {}
        self._ids = 0

    def open(self, child: _Child) -> tuple[int, queue.SimpleQueue[dict[str, Any]]]:
        """A new request to ``child``: its id and where its replies will arrive."""
        with self.lock:
            self._ids += 1
            replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
            self.waiting[self._ids] = (child, replies)
            return self._ids, replies

    def close(self, ident: int) -> None:
        with self.lock:
            self.waiting.pop(ident, None)

    def deliver(self, reply: dict[str, Any]) -> None:
        with self.lock:
            waiting = self.waiting.get(reply.get("id", -1))  # type: ignore[arg-type]
        if waiting is not None:
            waiting[1].put(reply)

    def fail(self, child: _Child, why: str) -> None:
        with self.lock:
            stranded = [replies for owner, replies in self.waiting.values() if owner is child]
        for replies in stranded:
            replies.put({"error": why})


def _read(child: _Child, mailbox: _Mailbox) -> None:
    """A child's reader thread: its first line to the starter, pongs to the watchdog, the rest to their requests;
    at EOF every request still waiting on this child fails."""
    assert child.popen.stdout is not None
    started = False
    for line in child.popen.stdout:
        if not started:
            started = True
            child.hello.put(line)
            continue
        reply = parse(line)
        if "pong" in reply:
            child.pong.set()
        else:
            mailbox.deliver(reply)
    child.popen.stdout.close()
    if not started:
        child.hello.put("")
    try:
        ended = f"exited (code {child.popen.wait(1)})"
    except subprocess.TimeoutExpired:
        ended = "closed its output"
    mailbox.fail(child, f"the SmolLM2 worker process {ended} while generating")
    child.gone.set()


class _Supervisor:
    """The worker's current child: started on demand, watched by a thread of its own, replaced when it stops
    answering (see the module doc). ``epoch`` grows when the worker is closed: a replacement under way for an older
    epoch stands down."""

    def __init__(self, argv: list[str], first_token_s: float, max_in_flight: int) -> None:
        self.argv = argv
        self.first_token_s = first_token_s
        self.queue_size = 2 * max_in_flight + 2  # each request's generate and stop, a ping, the end
        self.mailbox = _Mailbox()
        self.changed = threading.Condition()
        self.spawning = threading.Lock()
        self.child: _Child | None = None
        self.problem: str | None = None
        self.replacing = False
        self.closed = False
        self.epoch = 0
        self.starts = 0

    def start(self, epoch: int | None = None) -> _Child:
        """The running child, started now (blocking until it is loaded) if there is none; with ``epoch``, only
        while the worker is still in that epoch."""
        with self.spawning:
            with self.changed:
                if self.child is not None:
                    return self.child
                if epoch is not None and epoch != self.epoch:
                    raise SmolLMProcessError("the SmolLM2 worker process was closed")
                epoch = self.epoch
            try:
                child = self._spawn()
            except SmolLMProcessError as exc:
                with self.changed:
                    if not self.replacing:  # a replacement says why it replaces
                        self.problem = f"the oracle worker could not start: {exc}"
                raise
            return self._install(child, epoch)

    def ready_child(self, wait_s: float) -> tuple[_Child, bool]:
        """(the running child, whether it was started just now): while one is being replaced (or has just ended),
        waited for up to ``wait_s``; none at all (never started, closed): started now."""
        give_up = time.monotonic() + wait_s
        with self.changed:
            while True:
                child = self.child
                if child is not None and not child.gone.is_set():
                    return child, False
                if child is None and not self.replacing:
                    break
                left = give_up - time.monotonic()
                if left <= 0:
                    raise SmolLMProcessError(self.problem or f"{NOT_ANSWERING}: its child has ended")
                self.changed.wait(min(left, 0.1))  # an ended child's watchdog replaces it within its tick
        return self.start(), True

    def close(self, grace_s: float = 5.0) -> None:
        """End the child (a replacement under way stands down); a later :meth:`start` starts another."""
        with self.changed:
            child, self.child = self.child, None
            self.epoch += 1
            self.replacing, self.problem = False, None
            self.changed.notify_all()
        if child is not None:
            child.end(grace_s)

    def shutdown(self) -> None:
        """The :class:`SmolLMProcess` was dropped: its child's stdin closes now, without waiting (its watchdog kills
        it if it lingers)."""
        with self.changed:
            child, self.child = self.child, None
            self.closed = True
            self.epoch += 1
            self.changed.notify_all()
        if child is not None and not child.finish():
            child.kill()

    def _spawn(self) -> _Child:
        try:
            popen = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                     text=True, bufsize=1, close_fds=True)
        except OSError as exc:
            raise SmolLMProcessError(f"could not start the SmolLM2 worker process: {exc}") from exc
        child = _Child(popen, self.mailbox, self.queue_size)
        try:
            line = child.hello.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            child.kill()
            raise SmolLMProcessError(f"the SmolLM2 worker process was not ready within {START_TIMEOUT_S:.0f} s") \
                from None
        hello = parse(line) if line else {}
        if not hello.get("ready"):
            child.kill()
            why = hello.get("failed") or f"it exited with code {popen.returncode}"
            raise SmolLMProcessError(f"the SmolLM2 worker process did not start: {why}")
        return child

    def _install(self, child: _Child, epoch: int) -> _Child:
        with self.changed:
            if self.epoch != epoch:  # closed while it loaded
                stale = True
            else:
                stale = False
                self.child, self.problem, self.replacing = child, None, False
                self.starts += 1
                self.changed.notify_all()
        if stale:
            child.kill()
            raise SmolLMProcessError("the SmolLM2 worker process was closed while it started")
        threading.Thread(target=self._watch, args=(child,), name="smollm-process-watchdog", daemon=True).start()
        return child

    def _watch(self, child: _Child) -> None:
        """Ping ``child`` while it is the current one; replace it when it stops answering, exits or closes its
        stdout. A dropped worker's child is ended here."""
        ping = 0
        pinged: float | None = None
        next_ping = time.monotonic() + HEARTBEAT_S
        while True:
            with self.changed:
                current, closed = self.child is child, self.closed
            if not current:
                if closed:
                    child.end(5.0)
                return
            if child.gone.is_set():
                code = child.popen.poll()
                why = "it closed its output" if code is None else f"it exited (code {code})"
                break
            now = time.monotonic()
            if pinged is not None and child.pong.is_set():
                pinged, next_ping = None, now + HEARTBEAT_S
            if pinged is None and now >= next_ping:
                child.pong.clear()
                ping += 1
                if not child.send({"op": "ping", "id": ping}):
                    why = "it reads nothing"
                    break
                pinged = now
            elif pinged is not None and now - pinged > self.first_token_s:
                why = f"no answer to a ping within {self.first_token_s:g} s"
                break
            child.gone.wait(0.1)
        self._replace(child, why)

    def _replace(self, child: _Child, why: str) -> None:
        """Kill ``child`` (its requests fail now) and start another, retrying with :data:`RESTART_DELAYS_S`."""
        with self.changed:
            if self.child is not child:
                return
            self.child, self.replacing, epoch = None, True, self.epoch
            self.problem = f"{NOT_ANSWERING} ({why}); restarting it"
            self.changed.notify_all()
        log.warning("the SmolLM2 worker process (pid %d) stopped answering (%s): restarting it", child.popen.pid,
                    why)
        self.mailbox.fail(child, f"the SmolLM2 worker process stopped answering ({why})")
        child.kill()
        attempt = 0
        while True:
            delay = RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)]
            with self.changed:
                self.changed.wait_for(lambda: self.epoch != epoch, delay)
                if self.epoch != epoch or self.child is not None:  # closed, or started by a caller meanwhile
                    return
            try:
                self.start(epoch)
                return
            except SmolLMProcessError as exc:
                attempt += 1
                with self.changed:
                    if self.epoch != epoch:
                        return
                    self.problem = f"{NOT_ANSWERING} ({why}); a new one did not start: {exc}"
                log.warning("the SmolLM2 worker process could not be restarted: %s", exc)


class SmolLMProcess:
    """One child process generating with SmolLM2 for every caller of :meth:`generate`, watched (see the module doc).

    ``niceness``: the child's niceness (Linux), so on a busy CPU the oracle waits, not the live frames;
    ``cache_root``: where the converted model is cached (default: the built-in cache root);
    ``torch_threads``: the child's intra-op threads (0: torch's default);
    ``first_token_s``: the longest wait for a request's first piece, for each next one, and for a ping's answer;
    ``answer_s``: the longest a whole answer may take; ``max_in_flight``: requests at once (more are refused).
    """

    def __init__(self, cache_root: Path | None = None, *, niceness: int = 10, torch_threads: int = 1,
                 first_token_s: float = FIRST_TOKEN_S, answer_s: float = ANSWER_S,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        if first_token_s <= 0 or answer_s <= 0 or max_in_flight < 1:
            raise ValueError("the deadlines must be positive and max_in_flight at least 1")
        self.cache_root = cache_root
        self.niceness = niceness
        self.torch_threads = torch_threads
        self.first_token_s = first_token_s
        self.answer_s = answer_s
        self.max_in_flight = max_in_flight
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._supervisor = _Supervisor(self._argv(), first_token_s, max_in_flight)
        weakref.finalize(self, self._supervisor.shutdown)  # the last reference gone (a stack dropped): the child too
        self._owner_pid = os.getpid()

    def belongs_here(self) -> bool:
        """Whether this is the process that made the worker: a forked copy (ZeroGPU runs a decorated call in a
        fork) has neither its child nor its threads, and generates in a thread of its own instead."""
        return os.getpid() == self._owner_pid

    def start(self) -> None:
        """Start the child and wait until its model is loaded (no-op while one runs); raises
        :class:`SmolLMProcessError` with the child's reason."""
        self._supervisor.start()

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first start, after it ended, while it is replaced)."""
        child = self._supervisor.child
        return child.popen.pid if child is not None and child.popen.poll() is None else None

    @property
    def starts(self) -> int:
        """How many children have started (the first, and each replacement)."""
        return self._supervisor.starts

    def problem(self) -> str | None:
        """Why the worker cannot answer now ("oracle worker not answering (...); restarting it", or why it did not
        start), or None: a child is up or none was asked for yet."""
        return self._supervisor.problem

    def generate(self, messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
                 stop: threading.Event) -> None:
        """Generate in the child, blocking; ``emit`` gets each new piece of text. Returns at the end, or soon
        after ``stop`` is set (the child is told to stop). Raises :class:`SmolLMProcessError` when refused (too
        many in flight, no child), :class:`SmolLMProcessTimeout` past a deadline."""
        if not self._slots.acquire(blocking=False):
            raise SmolLMProcessError(f"the SmolLM2 worker process has {self.max_in_flight} requests in flight, "
                                     "its limit: this one is refused")
        try:
            self._generate(messages, max_new_tokens, emit, stop)
        finally:
            self._slots.release()

    def _generate(self, messages: Sequence[ChatMessage], max_new_tokens: int, emit: Callable[[str], None],
                  stop: threading.Event) -> None:
        asked = time.monotonic()
        child, cold = self._supervisor.ready_child(self.first_token_s)
        asked = time.monotonic() if cold else asked  # loading is not answering: the deadlines start now
        ident, replies = self._supervisor.mailbox.open(child)
        try:
            if not child.send({"op": "generate", "id": ident, "max_new_tokens": int(max_new_tokens),
                               "messages": [[m.role, m.content] for m in messages]}):
                raise SmolLMProcessError(f"{NOT_ANSWERING}: it reads no more requests")
            whole_by, next_by, pieces = asked + self.answer_s, asked + self.first_token_s, 0
            while True:
                if stop.is_set():
                    child.send({"op": "stop", "id": ident})
                    return
                now = time.monotonic()
                if now >= min(whole_by, next_by):
                    child.send({"op": "stop", "id": ident})
                    raise SmolLMProcessTimeout(self._late(pieces, whole_by <= next_by))
                try:
                    reply = replies.get(timeout=min(_POLL_S, min(whole_by, next_by) - now))
                except queue.Empty:
                    if child.gone.is_set() and replies.empty():  # it died before its reader saw this request
                        raise SmolLMProcessError(f"the SmolLM2 worker process exited (code {child.popen.poll()}) "
                                                 "while generating") from None
                    continue
                if "piece" in reply:
                    pieces += 1
                    next_by = time.monotonic() + self.first_token_s
                    emit(str(reply["piece"]))
                elif "end" in reply:
                    return
                else:
                    raise SmolLMProcessError(str(reply.get("error", "the SmolLM2 worker process failed")))
        finally:
            self._supervisor.mailbox.close(ident)

    def _late(self, pieces: int, whole: bool) -> str:
        if whole:
            return f"the SmolLM2 worker process gave no whole answer within {self.answer_s:g} s"
        which = "first piece" if pieces == 0 else f"next piece (after {pieces})"
        return f"the SmolLM2 worker process gave no {which} within {self.first_token_s:g} s"

    def close(self) -> None:
        """End the child (its stdin closes, then a kill after 5 s); a later :meth:`generate` starts another."""
        self._supervisor.close()

    def _argv(self) -> list[str]:
        package_root = str(Path(__file__).resolve().parents[2])  # this very kame_core, whatever the cwd holds
        boot = f"import sys; sys.path.insert(0, {package_root!r}); from {smollm_worker.__name__} import main; main()"
        argv = [sys.executable, "-c", boot, "--niceness", str(self.niceness), "--torch-threads",
                str(self.torch_threads), "--workers", str(self.max_in_flight)]
        if self.cache_root is not None:
            argv += ["--cache-root", str(self.cache_root)]
        return argv
