"""One live conversation over the protocol (:mod:`.protocol`): a :class:`ChatSession` per connection, a
transport around one :class:`~kame_core.session.LiveSession`.

The live session owns the conversation (a :class:`~kame_core.session.LiveSource` with a jitter buffer, a fresh
KAME runner on a real-time clock in its own thread -- own STT and front-end state or a neural pool slot, own
trace, oracle manager and LLM streams), so sessions never see each other's state. This adapter sends the
handshake once the runner is built (models warm), decodes client audio (Opus or raw PCM) into it, and gives
the live session its sinks: the connection's (:func:`~.frame_sinks.connection_sinks`: each frame's audio (0x01 or
0x08), text piece (0x02) and live trace events (0x07), the turn onsets, hint levels, latency breakdowns and
metrics), then the journal. The session ends when the client disconnects, sends ``{"type": "end"}``, passes
a limit, or sends too much that is not the protocol; then the driver stops (its LLM streams are cancelled),
the front-end slot is given back, and the trace with both audio tracks is saved by the
:class:`~kame_core.session.SessionStore` of the sessions folder.

The transport is a :class:`Connection` (the server adapts a Starlette websocket; tests may pass their own).

Threads: :meth:`ChatSession.serve` and its receive and send tasks run on the server's event loop; the sinks run
on the live session's thread and hand their messages to the loop (``call_soon_threadsafe``). The whole model,
with every hand-off: docs/architecture.md, "The threads of a live session".
"""
from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

import numpy as np

from ..clock import SAMPLE_RATE, Clock
from ..protocols import PoolFull
from ..record.trace import SessionTrace
from ..session import LiveSession, SessionDriver, SessionStore
from ..session.disk import error_words
from ..session.journal import SessionJournal
from ..session.saving import RetryingSaves, save_with_retries
from ..session.store import claim_digest, default_sessions_dir, new_session_id, session_file
from . import notices as N
from . import protocol as P
from .frame_sinks import connection_sinks

if TYPE_CHECKING:
    from .metrics import SessionMetricsTap

__all__ = ["ChatSession", "Connection", "SessionEnd", "default_sessions_dir", "session_file"]

log = logging.getLogger("kame.serve")

#: the title of a session saved by the protocol
TITLE = "Talk session (live protocol)"


class Connection(Protocol):
    """A message transport: ``receive`` gives bytes, a str (a text frame) or None once the client is gone."""

    async def receive(self) -> bytes | str | None: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


@dataclass
class SessionEnd:
    """How a session ended: its id, the saved scenario (None when no frame was made), why it ended, and the
    close code sent (None when the client had already gone)."""

    session_id: str
    path: Path | None
    frames: int
    reason: str
    close_code: int | None
    warnings: list[str] = field(default_factory=list)
    #: why the session could not be saved ("" when it was, or had nothing to save)
    save_error: str = ""


class _End(Exception):
    """Ends the receive loop with a close code and reason."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@dataclass(eq=False)  # a session is itself: compared and hashed by identity
class ChatSession:
    """One conversation on one connection (see the module docstring). ``make_runner`` builds a fresh KAME runner
    on the clock it is given (e.g. ``lambda clock: stack.runner("kame", clock=clock)``)."""

    make_runner: Callable[[Clock], SessionDriver]
    sessions_dir: Path
    limits: P.Limits = field(default_factory=P.Limits)
    pcm_out: bool = False
    head_start_s: float = 0.16
    components: str = ""
    session_id: str = field(default_factory=new_session_id)
    #: a :class:`~.metrics.SessionMetricsTap` the session's frames are reported to (None: not reported)
    metrics: SessionMetricsTap | None = None
    #: the claim of the page that opened the session (``?claim=``): only it can open the saved session in the app
    claim: str = ""
    #: where a save that failed at the end is retried in the background (the server's; None: not retried)
    retries: RetryingSaves | None = None
    #: the journal's flush interval (seconds)
    journal_every_s: float = 1.0
    #: the replica serving it (``serve --replicas``; None on a single server), told in the ``session`` notice
    replica: int | None = None

    def __post_init__(self) -> None:
        import sphn

        self.store = SessionStore(Path(self.sessions_dir))
        self.warnings: list[str] = []
        self._opus_in = sphn.OpusStreamReader(SAMPLE_RATE)
        self._bad = 0
        self.live: LiveSession | None = None
        self._post: Callable[[list[bytes]], None] = lambda messages: None
        self._stop: asyncio.Future[tuple[int, str]] | None = None
        self._journal: SessionJournal | None = None

    def request_stop(self, code: int = P.CLOSE_GOING_AWAY, reason: str = "server shutting down") -> None:
        """End the session as the server's own decision (on its event loop): stop, save, ``saved``, close."""
        if self._stop is not None and not self._stop.done():
            self._stop.set_result((code, reason))

    def _recording_failed(self, message: str) -> None:
        """The journal could not write (the session's thread): the client is told at once, the session goes on."""
        self.warnings.append(message)
        self._post([P.notice(N.InputWarning(message, about="recording"))])

    @property
    def received_s(self) -> float:
        return 0.0 if self.live is None else self.live.received_s

    @functools.cached_property
    def _claim_digest(self) -> str:
        """What is kept of the page's claim, in the journal and beside the saved file ("" without one, or for a
        malformed one: logged once, not kept)."""
        if not self.claim:
            return ""
        try:
            return claim_digest(self.claim)
        except ValueError as err:
            log.warning("session %s: claim not kept: %s", self.session_id, err)
            return ""

    def _trace(self) -> SessionTrace | None:
        """The trace being built (read on the session's thread by its sink and journal)."""
        return None if self.live is None else self.live.source.trace

    # -- the whole session ----------------------------------------------------------------------------
    async def serve(self, conn: Connection) -> SessionEnd:
        """Run the conversation on ``conn`` until it ends; returns how it ended (the scenario is saved)."""
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        driver_done: asyncio.Future[None] = loop.create_future()

        def post(messages: list[bytes]) -> None:  # from the session thread
            loop.call_soon_threadsafe(_put_all, outbox, messages)

        self._post = post
        self._stop = loop.create_future()

        def ended() -> None:  # the session's thread, once the driver ended and the sinks sent their last figures
            loop.call_soon_threadsafe(_resolve, driver_done)

        journal = SessionJournal(self.store.journal(self.session_id), session_id=self.session_id, title=TITLE,
                                 components=self.components, trace_of=_weakly(self._trace),
                                 flush_every_s=self.journal_every_s, on_failure=_weakly(self._recording_failed),
                                 claim_digest=self._claim_digest)
        self._journal = journal
        try:
            self.live = await asyncio.to_thread(
                LiveSession, self.make_runner, head_start_s=self.head_start_s, max_input_s=float("inf"),
                sinks=(*connection_sinks(post, self.pcm_out, _weakly(self._trace), self.metrics), journal),
                on_end=ended)
        except PoolFull as err:  # every slot of the model is taken (another door took the last one)
            reason = f"server busy: {err}"
            log.warning("session %s refused: %s", self.session_id, reason)
            await conn.close(P.CLOSE_TRY_LATER, reason[:120])
            return SessionEnd(self.session_id, None, 0, reason, P.CLOSE_TRY_LATER)
        except Exception as err:  # noqa: BLE001 - told to the client; the server goes on
            log.exception("session %s: the runner could not be built", self.session_id)
            reason = f"the session could not start: {error_words(err)}"
            await conn.close(P.CLOSE_INTERNAL, reason)
            return SessionEnd(self.session_id, None, 0, reason, P.CLOSE_INTERNAL)
        live = self.live
        assert live is not None  # built above
        try:
            return await self._serve(conn, outbox, driver_done)
        finally:
            live.stop()  # idempotent; a driver that never started gives its slot back here

    async def _serve(self, conn: Connection, outbox: asyncio.Queue[bytes | None],
                     driver_done: asyncio.Future[None]) -> SessionEnd:
        assert self.live is not None
        sender = asyncio.ensure_future(self._send_all(conn, outbox))
        await outbox.put(P.message(P.HANDSHAKE))
        front_end = self.live.front_end
        await outbox.put(P.notice(N.SessionStarted(
            self.session_id, self.components, "pcm" if self.pcm_out else "opus", self.limits.max_session_s,
            N.FrontEndInfo.of(front_end).to_json() if front_end is not None else None, self.replica)))
        code: int | None
        try:
            code, reason, saved_reply = await self._receive_until_end(conn, driver_done)
        except Exception as err:  # noqa: BLE001 - the session fails alone; the server goes on
            log.exception("session %s failed", self.session_id)
            code, reason, saved_reply = P.CLOSE_INTERNAL, f"server error: {error_words(err)}", False
        path, frames, save_error, retrying = await self._finish()
        if code is not None:
            if saved_reply or frames:  # whatever closes it, a session that had frames is told what was saved
                await outbox.put(P.notice(N.Saved(self.session_id, frames, path.name if path else None,
                                                  save_error or None, retrying)))
            await outbox.put(None)
            try:
                await asyncio.wait_for(sender, 10.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - the client may be gone
                sender.cancel()
            try:
                await conn.close(code, reason[:120])
            except Exception:  # noqa: BLE001 - already closed by the client
                pass
        else:
            sender.cancel()
        log.info("session %s ended (%s): %d frames, saved to %s", self.session_id, reason, frames, path)
        return SessionEnd(self.session_id, path, frames, reason, code, list(self.warnings), save_error)

    async def _send_all(self, conn: Connection, outbox: asyncio.Queue[bytes | None]) -> None:
        while True:
            data = await outbox.get()
            if data is None:
                return
            await conn.send(data)

    async def _receive_until_end(self, conn: Connection, driver_done: asyncio.Future[None]
                                 ) -> tuple[int | None, str, bool]:
        """Read messages until the session must end: (close code or None if the client left, reason, whether
        to reply ``saved``). The time limits (:class:`~.protocol.Limits`) end it whatever the client sends."""
        loop = asyncio.get_running_loop()
        started = last_audio = loop.time()
        limits = self.limits
        while True:
            now = loop.time()
            heard = self.received_s > 0
            deadline = min(started + limits.max_wall_s,
                           (last_audio + limits.idle_s) if heard else (started + limits.first_audio_s))
            receive = asyncio.ensure_future(conn.receive())
            waited: set[asyncio.Future[Any]] = {receive, driver_done}
            if self._stop is not None:
                waited.add(self._stop)
            done, _ = await asyncio.wait(waited, timeout=max(0.0, deadline - now),
                                         return_when=asyncio.FIRST_COMPLETED)
            if self._stop is not None and self._stop in done:  # the server's decision (shutting down)
                receive.cancel()
                code, reason = self._stop.result()
                return code, reason, True
            if not done:  # a time limit
                receive.cancel()
                if loop.time() >= started + limits.max_wall_s:
                    return P.CLOSE_POLICY, f"session wall-clock limit of {limits.max_wall_s:.0f} s reached", True
                if heard:
                    return P.CLOSE_POLICY, f"no audio for {limits.idle_s:.0f} s: the session was closed", True
                return P.CLOSE_POLICY, f"no audio within {limits.first_audio_s:.0f} s of the handshake", True
            if receive not in done:
                receive.cancel()
                error = self.live.error if self.live is not None else ""
                return P.CLOSE_INTERNAL, f"the session ended on the server: {error or 'no reason'}", True
            data = receive.result()
            if data is None:
                return None, "client disconnected", False
            before = self.received_s
            try:
                self._on_message(data)
            except _End as end:
                return end.code, end.reason, end.code in (P.CLOSE_NORMAL, P.CLOSE_POLICY)
            if self.received_s > before:
                last_audio = loop.time()

    # -- one message ----------------------------------------------------------------------------------
    def _on_message(self, data: bytes | str) -> None:
        if isinstance(data, str):
            return self._bad_input("text frames are not part of the protocol (send binary messages)")
        if len(data) > self.limits.max_message_bytes:
            raise _End(P.CLOSE_TOO_BIG, f"message of {len(data)} bytes over the limit of "
                                        f"{self.limits.max_message_bytes}")
        try:
            kind, payload = P.split(data)
        except P.ProtocolError as err:
            return self._bad_input(str(err))
        if kind == P.AUDIO:
            if not P.looks_like_ogg(payload):
                return self._bad_input(f"kind 0x01 payload of {len(payload)} bytes is not an Ogg/Opus page")
            try:  # any decoder failure is the client's problem: a warning, a fresh decoder, the session goes on
                audio: np.ndarray = np.asarray(self._opus_in.append_bytes(payload), np.float32).reshape(-1)
            except Exception as err:  # noqa: BLE001 - sphn raises plain exceptions for bad streams
                import sphn

                self._opus_in = sphn.OpusStreamReader(SAMPLE_RATE)
                return self._bad_input(f"Ogg/Opus data that does not decode ({type(err).__name__}: "
                                       f"{str(err)[:80]}); the decoder was reset")
            limit = int(self.limits.max_message_audio_s * SAMPLE_RATE)
            if len(audio) > limit:
                self._bad_input(f"one message decoded to {len(audio) / SAMPLE_RATE:.1f} s of audio, over "
                                f"{self.limits.max_message_audio_s:g} s; the rest was dropped")
                audio = audio[:limit]
            self._push(audio)
        elif kind == P.PCM:
            try:
                self._push(P.pcm_from_bytes(payload))
            except P.ProtocolError as err:
                return self._bad_input(str(err))
        elif kind == P.EVENT:
            self._on_control(payload)
        else:
            self._bad_input(f"unknown message kind 0x{kind:02x} ignored")

    def _on_control(self, payload: bytes) -> None:
        try:
            message = N.read_client_message(payload)
        except P.ProtocolError as err:
            return self._bad_input(str(err))
        if isinstance(message, N.End):
            raise _End(P.CLOSE_NORMAL, "the client ended the session")

    def _push(self, audio: np.ndarray) -> None:
        if not len(audio) or self.live is None:
            return
        self.live.push(audio)
        if self.live.received_s > self.limits.max_session_s:
            raise _End(P.CLOSE_POLICY, f"session length limit of {self.limits.max_session_s:.0f} s reached")

    def _bad_input(self, what: str) -> None:
        self._bad += 1
        self.warnings.append(what)
        log.warning("session %s: %s", self.session_id, what)
        if self._bad > self.limits.max_bad_messages:
            raise _End(P.CLOSE_UNSUPPORTED, f"too many messages that are not the protocol; last: {what}")
        self._post([P.notice(N.InputWarning(what))])

    async def _finish(self, timeout_s: float = 60.0) -> tuple[Path | None, int, str, bool]:
        """Stop the driver (cancelling its LLM streams), wait for it and save the scenario: (file, frames, why it
        could not be saved, whether the save is retried in the background). The journal is removed only once a
        save succeeded: a session that cannot be saved is recovered from it at the next start."""
        live = self.live
        if live is None:
            return None, 0, "", False
        live.stop()
        try:
            trace = await asyncio.to_thread(live.wait, timeout_s)
        except TimeoutError:
            log.error("session %s: the driver did not stop within %.0f s", self.session_id, timeout_s)
            partial = live.source.trace
            frames = partial.n_frames if partial is not None else 0
            return None, frames, "the session did not stop in time; what its journal holds is recovered at the " \
                                 "server's next start", False
        journal = self._journal
        if trace is None or trace.n_frames == 0:
            if journal is not None:
                journal.discard()
            return None, 0, "", False

        def save() -> Path:
            return self.store.save(self.session_id, {"kame": trace}, title=TITLE, components=self.components,
                                   tags=("live", "talk")).path

        def saved(path: Path) -> None:
            if journal is not None:
                journal.discard()  # saved: the journal that covered a crash is no longer needed
            if self._claim_digest:
                try:
                    self.store.save_claim_digest(self.session_id, self._claim_digest)
                except OSError as err:
                    log.warning("session %s: claim not kept: %s", self.session_id, err)

        what = f"session {self.session_id}"
        outcome = await asyncio.to_thread(save_with_retries, save, what=what)
        if outcome.saved:
            assert outcome.path is not None
            saved(outcome.path)
            return outcome.path, trace.n_frames, "", False
        log.error("%s: %s after %d attempts", what, outcome.error, outcome.attempts)
        if self.retries is None:
            return None, trace.n_frames, outcome.error, False
        self.retries.start(save, what=what, on_saved=saved)
        return None, trace.n_frames, outcome.error, True


def _put_all(queue: asyncio.Queue[bytes | None], messages: list[bytes]) -> None:
    for data in messages:
        queue.put_nowait(data)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


Params = ParamSpec("Params")
R = TypeVar("R")


def _weakly(method: Callable[Params, R]) -> Callable[Params, R | None]:
    """``method`` (bound to a :class:`ChatSession`) without holding its session (None once it is gone): the live
    session's sink and journal keep their callbacks, and a strong one closes the cycle ChatSession -> LiveSession
    -> sink / journal -> ChatSession, which reference counting never frees (only a full garbage collection)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Params.args, **kwargs: Params.kwargs) -> R | None:
        bound = ref()
        return None if bound is None else bound(*args, **kwargs)

    return call
