"""One live conversation over the protocol (:mod:`.protocol`): a :class:`ChatSession` per connection.

The session owns everything of its conversation -- a :class:`~kame_core.session.LiveSource`, a fresh KAME
runner from the stack (own STT and front-end state, own trace, oracle manager and LLM streams) on a
:class:`~kame_core.clock.RealTimeClock` in its own thread -- so sessions never see each other's state.

Flow: the runner is built (models warm), the handshake is sent, then client audio (Opus or raw PCM) is decoded
into the source; the driver starts once ``head_start_s`` of audio is buffered (a small jitter buffer). Each
frame the driver makes reaches :class:`StreamSink` at once and goes out as audio (0x01 or 0x08), a text piece
(0x02) and live trace events (0x07). The session ends when the client disconnects, sends ``{"type": "end"}``,
passes a limit, or sends too much that is not the protocol; then the driver stops (its LLM streams are
cancelled) and the trace with both audio tracks is saved as a scenario file in the sessions folder.

The transport is a :class:`Connection` (the server adapts a Starlette websocket; tests may pass their own).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from ..clock import FRAME_SECONDS, SAMPLE_RATE, RealTimeClock, frame_of
from ..neural.choice import NeuralModels
from ..neural.pool import PoolFull
from ..pipelines.stack import release_front_end
from ..scenario import Scenario, save_scenario
from ..session import FrameOut, LiveSource
from ..trace import EventKind, SessionTrace
from . import protocol as P

log = logging.getLogger("kame.serve")

#: an assistant output frame louder than this RMS counts as speech (turn-onset measurement)
VOICED_RMS = 0.01
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def default_sessions_dir(env: dict[str, str] | None = None) -> Path:
    """``KAME_SESSIONS_DIR``, else ``$XDG_CACHE_HOME/kame/sessions`` (``~/.cache/kame/sessions``)."""
    env = dict(os.environ) if env is None else env
    if env.get("KAME_SESSIONS_DIR"):
        return Path(env["KAME_SESSIONS_DIR"]).expanduser()
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kame" / "sessions"


def session_file(sessions_dir: Path, session_id: str) -> Path:
    """The scenario file of a saved session; a malformed id raises ValueError (ids never name other paths)."""
    if not _ID_RE.match(session_id or ""):
        raise ValueError(f"not a session id: {session_id!r}")
    return Path(sessions_dir) / f"{session_id}.kame"


def new_session_id() -> str:
    return f"talk-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


class Connection(Protocol):
    """A message transport: ``receive`` gives bytes, a str (a text frame) or None once the client is gone."""

    async def receive(self) -> bytes | str | None: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


class StreamSink:
    """The driver's :class:`~kame_core.session.FrameSink` for one connection: turns each frame into wire
    messages (called on the session's thread; ``post`` hands them to the connection's event loop)."""

    def __init__(self, post: Callable[[list[bytes]], None], pcm_out: bool) -> None:
        import sphn

        self._post = post
        self._opus = None if pcm_out else sphn.OpusStreamWriter(SAMPLE_RATE)
        self._voiced: deque[tuple[int, bool]] = deque(maxlen=400)   # (frame, voiced) of the last 32 s
        self._user_end: float | None = None                         # a user turn waiting for its onset
        self.turns: list[dict[str, Any]] = []

    def on_frame(self, frame: FrameOut) -> None:
        out: list[bytes] = []
        for event in frame.events:
            if event.kind in P.LIVE_KINDS:
                out.append(P.json_message(P.event_json(event)))
            self._follow_turns(event.kind, event.t, event.data)
        if frame.record.text_piece:
            out.append(P.message(P.TEXT, frame.record.text_piece.encode("utf-8")))
        if self._opus is None:
            out.append(P.message(P.PCM, P.pcm_to_bytes(frame.output)))
        else:
            pages = self._opus.append_pcm(np.asarray(frame.output, np.float32))
            if pages:
                out.append(P.message(P.AUDIO, pages))
        rms = float(np.sqrt(np.mean(np.square(frame.output, dtype=np.float64)))) if len(frame.output) else 0.0
        self._voiced.append((frame.index, rms > VOICED_RMS))
        onset = self._onset()
        if onset is not None:
            out.append(P.json_message(onset))
        self._post(out)

    def _follow_turns(self, kind: EventKind, t: float, data: dict[str, Any]) -> None:
        if kind is EventKind.USER_SPEECH_START:
            self._user_end = None
        elif kind is EventKind.USER_SPEECH_END:
            self._user_end = float(data.get("audio_t", t))

    def _onset(self) -> dict[str, Any] | None:
        """The first voiced output frame at or after the pending user turn's end, as a ``turn_onset``."""
        if self._user_end is None:
            return None
        first = frame_of(self._user_end)
        for index, voiced in self._voiced:
            if index >= first and voiced:
                start = index * FRAME_SECONDS
                onset = {"type": "turn_onset", "turn": len(self.turns), "user_end": round(self._user_end, 3),
                         "assistant_start": round(start, 3),
                         "delay_s": round(max(0.0, start - self._user_end), 3)}
                self.turns.append(onset)
                self._user_end = None
                return onset
        return None


@dataclass
class SessionResult:
    """How a session ended: its id, the saved scenario (None when no frame was made), why it ended, and the
    close code sent (None when the client had already gone)."""

    session_id: str
    path: Path | None
    frames: int
    reason: str
    close_code: int | None
    warnings: list[str] = field(default_factory=list)


class _End(Exception):
    """Ends the receive loop with a close code and reason."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@dataclass
class ChatSession:
    """One conversation (see the module docstring). ``make_runner`` builds a fresh KAME runner on the clock it
    is given (e.g. ``lambda clock: stack.runner("kame", clock=clock)``)."""

    make_runner: Callable[[RealTimeClock], Any]
    sessions_dir: Path
    limits: P.Limits = field(default_factory=P.Limits)
    pcm_out: bool = False
    head_start_s: float = 0.16
    components: str = ""
    session_id: str = field(default_factory=new_session_id)

    def __post_init__(self) -> None:
        import sphn

        self.source = LiveSource()
        self.received_s = 0.0
        self.warnings: list[str] = []
        self._opus_in = sphn.OpusStreamReader(SAMPLE_RATE)
        self._bad = 0
        self._runner: Any = None
        self._thread: threading.Thread | None = None
        self._trace: SessionTrace | None = None
        self._error = ""
        self._sink: StreamSink | None = None
        self._post: Callable[[list[bytes]], None] = lambda messages: None

    # -- the whole session ----------------------------------------------------------------------------
    async def serve(self, conn: Connection) -> SessionResult:
        """Run the conversation on ``conn`` until it ends; returns how it ended (the scenario is saved)."""
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._driver_done = loop.create_future()
        try:
            self._runner = await asyncio.to_thread(self.make_runner, RealTimeClock())
        except PoolFull as err:  # every slot of the model is taken (another door took the last one)
            reason = f"server busy: {err}"
            log.warning("session %s refused: %s", self.session_id, reason)
            await conn.close(P.CLOSE_TRY_LATER, reason[:120])
            return SessionResult(self.session_id, None, 0, reason, P.CLOSE_TRY_LATER)
        except Exception as err:  # noqa: BLE001 - told to the client; the server goes on
            log.exception("session %s: the runner could not be built", self.session_id)
            reason = f"the session could not start: {type(err).__name__}"
            await conn.close(P.CLOSE_INTERNAL, reason)
            return SessionResult(self.session_id, None, 0, reason, P.CLOSE_INTERNAL)
        try:
            return await self._serve(conn, loop, outbox)
        finally:
            release_front_end(self._runner)  # the pool slot is free again, however the session ended

    async def _serve(self, conn: Connection, loop: asyncio.AbstractEventLoop,
                     outbox: "asyncio.Queue[bytes | None]") -> SessionResult:
        def post(messages: list[bytes]) -> None:  # from the session thread
            loop.call_soon_threadsafe(_put_all, outbox, messages)

        self._post = post
        self._sink = StreamSink(post, self.pcm_out)
        sender = asyncio.ensure_future(self._send_all(conn, outbox))
        await outbox.put(P.message(P.HANDSHAKE))
        front_end = getattr(self._runner, "front_end", None)
        await outbox.put(P.json_message({"type": "session", "id": self.session_id, "components": self.components,
                                         "audio_out": "pcm" if self.pcm_out else "opus",
                                         "max_session_s": self.limits.max_session_s,
                                         "front_end": NeuralModels.info(front_end).to_json()
                                         if front_end is not None else None}))
        code: int | None
        try:
            code, reason, saved_reply = await self._receive_until_end(conn)
        except Exception as err:  # noqa: BLE001 - the session fails alone; the server goes on
            log.exception("session %s failed", self.session_id)
            code, reason, saved_reply = P.CLOSE_INTERNAL, f"server error: {type(err).__name__}", False
        path, frames = await self._finish()
        if code is not None:
            if saved_reply:
                await outbox.put(P.json_message({"type": "saved", "id": self.session_id, "frames": frames,
                                                 "file": path.name if path else None}))
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
        return SessionResult(self.session_id, path, frames, reason, code, list(self.warnings))

    async def _send_all(self, conn: Connection, outbox: "asyncio.Queue[bytes | None]") -> None:
        while True:
            data = await outbox.get()
            if data is None:
                return
            await conn.send(data)

    async def _receive_until_end(self, conn: Connection) -> tuple[int | None, str, bool]:
        """Read messages until the session must end: (close code or None if the client left, reason, whether
        to reply ``saved``)."""
        while True:
            receive = asyncio.ensure_future(conn.receive())
            done, _ = await asyncio.wait({receive, self._driver_done}, return_when=asyncio.FIRST_COMPLETED)
            if receive not in done:
                receive.cancel()
                return P.CLOSE_INTERNAL, f"the session ended on the server: {self._error or 'no reason'}", False
            data = receive.result()
            if data is None:
                return None, "client disconnected", False
            try:
                self._on_message(data)
            except _End as end:
                return end.code, end.reason, end.code == P.CLOSE_NORMAL

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
            self._push(np.asarray(self._opus_in.append_bytes(payload), np.float32))
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
            obj = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return self._bad_input("a 0x07 control message must be one JSON object")
        if not isinstance(obj, dict) or obj.get("type") != "end":
            return self._bad_input(f"unknown control message {str(obj)[:60]!r} (known: {{\"type\": \"end\"}})")
        raise _End(P.CLOSE_NORMAL, "the client ended the session")

    def _push(self, audio: np.ndarray) -> None:
        if not len(audio):
            return
        self.source.push(audio)
        self.received_s += len(audio) / SAMPLE_RATE
        if self._thread is None and self.received_s >= self.head_start_s:
            self._start_driver()
        if self.received_s > self.limits.max_session_s:
            raise _End(P.CLOSE_POLICY, f"session length limit of {self.limits.max_session_s:.0f} s reached")

    def _bad_input(self, what: str) -> None:
        self._bad += 1
        self.warnings.append(what)
        log.warning("session %s: %s", self.session_id, what)
        if self._bad > self.limits.max_bad_messages:
            raise _End(P.CLOSE_UNSUPPORTED, f"too many messages that are not the protocol; last: {what}")
        self._post([P.json_message({"type": "warning", "message": what})])

    # -- the driver thread ----------------------------------------------------------------------------
    def _start_driver(self) -> None:
        loop = asyncio.get_running_loop()
        done = self._driver_done

        def run() -> None:
            try:
                self._trace = self._runner.run_sync(self.source, self._sink)
            except BaseException as err:  # noqa: BLE001 - reported through the close reason
                log.exception("session %s: the driver failed", self.session_id)
                self._error = f"{type(err).__name__}: {err}"
            finally:
                loop.call_soon_threadsafe(_resolve, done)

        self._thread = threading.Thread(target=run, name=f"kame-{self.session_id}", daemon=True)
        self._thread.start()

    async def _finish(self, timeout_s: float = 60.0) -> tuple[Path | None, int]:
        """Stop the driver (cancelling its LLM streams), wait for it and save the scenario."""
        self.source.close()
        if self._thread is None:
            return None, 0
        self._runner.stop()
        try:
            await asyncio.wait_for(asyncio.shield(self._driver_done), timeout_s)
        except asyncio.TimeoutError:
            log.error("session %s: the driver did not stop within %.0f s", self.session_id, timeout_s)
            return None, 0
        trace = self._trace
        if trace is None or trace.n_frames == 0:
            return None, 0
        scenario = Scenario(name=self.session_id, runs={"kame": trace}, title="Talk session (live protocol)",
                            description=f"Recorded live by KAME studio over /api/chat. Components: "
                                        f"{self.components}", tags=["live", "talk"])
        path = session_file(self.sessions_dir, self.session_id)
        await asyncio.to_thread(save_scenario, scenario, path)
        return path, trace.n_frames


def _put_all(queue: "asyncio.Queue[bytes | None]", messages: list[bytes]) -> None:
    for data in messages:
        queue.put_nowait(data)


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)
