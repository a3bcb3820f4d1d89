"""The tandem runner: one object owns one session and wires front-end, STT, oracle manager and clock.

Per 80 ms frame ``i`` (at session time ``(i + 1) * 80 ms``, when the frame's user audio is complete):

1. the user frame goes to the STT task (which runs concurrently, off the frame loop);
2. the oracle stream yields this frame's oracle token (start token / oracle id / padding);
3. the forced-delay gate says whether the front-end is held silent;
4. the front-end steps; the four streams and any self-correction are recorded in the trace.

``mode="kame"`` runs the oracle manager; ``mode="moshi"`` is the same front-end with the oracle stream
off (no STT, no LLM). The same code runs on the real-time and the virtual clock.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from .clock import FRAME_SECONDS, SAMPLES_PER_FRAME, Clock, VirtualClock
from .metrics import annotate_onsets
from .oracle import Conversation, OracleConfig, OracleManager, OracleStream
from .protocols import FrontEnd, ListeningFrontEnd, STTEvent, StreamingLLM, StreamingSTT
from .trace import EventKind, FrameRecord, OracleToken, SessionTrace, iter_frames, silence


class UserAudioSource(Protocol):
    """Where user audio comes from: ``read_frame(i)`` -> 1920 samples, or None once the input ended."""

    def read_frame(self, index: int) -> np.ndarray | None: ...


def note_missed_deadline(clock: Clock, trace: SessionTrace, frame: int, frame_due: float) -> None:
    """On a real-time clock, record a NOTE when frame ``frame`` (due at ``frame_due``) was produced more than
    one frame period late; the live benchmark counts these."""
    late = clock.now() - (frame_due + FRAME_SECONDS)
    if not clock.is_virtual and late > 0:
        trace.add_event(clock.now(), EventKind.NOTE, what="missed frame deadline", frame=frame,
                        late_ms=round(late * 1000, 1))


def follow_session(source: UserAudioSource, trace: SessionTrace) -> None:
    """Hand ``trace`` (being built) to a source that wants to follow the session it feeds.

    A source may define ``follow(trace)``; runners call it once before the first frame. Such a source can
    decide what to play next from what was said so far -- e.g. a simulated user who asks the follow-up
    question only after the answer ended (:class:`kame_core.eval.sessions.TurnTakingSource`). It must only
    read the trace.
    """
    follow = getattr(source, "follow", None)
    if callable(follow):
        follow(trace)


class ArraySource:
    """Replays a recorded 24 kHz user signal frame by frame."""

    def __init__(self, audio: np.ndarray) -> None:
        self._frames = iter_frames(np.asarray(audio, np.float32))

    def read_frame(self, index: int) -> np.ndarray | None:
        return self._frames[index] if index < len(self._frames) else None


class LiveSource:
    """Frames pushed as they arrive (a microphone); silence is read on an under-run. ``trace`` is the
    session being built from it (handed over by the runner; for a live display to snapshot)."""

    def __init__(self) -> None:
        self._frames: list[np.ndarray] = []
        self._buffer = np.zeros(0, np.float32)
        self.closed = False
        self.trace: SessionTrace | None = None

    def follow(self, trace: SessionTrace) -> None:
        self.trace = trace

    def push(self, audio: np.ndarray) -> None:
        self._buffer = np.concatenate([self._buffer, np.asarray(audio, np.float32)])
        while len(self._buffer) >= SAMPLES_PER_FRAME:
            self._frames.append(self._buffer[:SAMPLES_PER_FRAME])
            self._buffer = self._buffer[SAMPLES_PER_FRAME:]

    def close(self) -> None:
        self.closed = True

    def read_frame(self, index: int) -> np.ndarray | None:
        if index < len(self._frames):
            return self._frames[index]
        return None if self.closed else silence()


@dataclass
class SessionConfig:
    """Everything that shapes a session; recorded verbatim in the trace."""

    mode: Literal["kame", "moshi"] = "kame"
    oracle: OracleConfig = field(default_factory=OracleConfig)
    forced_delay_ms: int = 0
    seed: int = 0
    #: after the user input ends, stop once the front-end was quiet this long (and no oracle is pending)
    quiet_after_s: float = 1.5
    #: ... and never run longer than this after the input ended
    max_tail_s: float = 15.0
    title: str = ""

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "oracle": self.oracle.to_json(), "forced_delay_ms": self.forced_delay_ms,
                "seed": self.seed, "quiet_after_s": self.quiet_after_s, "max_tail_s": self.max_tail_s}


class ForcedDelayGate:
    """Holds the front-end silent until ``delay`` seconds after the end of the user's latest speech segment.

    While the user speaks (or before they first spoke) it holds; if the user resumes, the hold continues.
    A zero delay never holds: the front-end may start before the user finishes, as KAME does.
    """

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._speaking = False
        self._last_end: float | None = None

    def on_speech_start(self) -> None:
        self._speaking = True

    def on_speech_end(self, audio_end: float) -> None:
        self._speaking = False
        self._last_end = audio_end

    def holding(self, now: float) -> bool:
        if self.delay_s <= 0:
            return False
        if self._speaking or self._last_end is None:
            return True
        return now < self._last_end + self.delay_s


@dataclass
class _Session:
    """Per-session mutable state, created fresh by every :meth:`TandemRunner.run`."""

    trace: SessionTrace
    conversation: Conversation
    oracle_stream: OracleStream
    gate: ForcedDelayGate
    manager: OracleManager | None
    stt_queue: "asyncio.Queue[np.ndarray | None]"
    assistant_spoke_since_user: bool = False


class TandemRunner:
    """Runs one session at a time of a front-end (+ STT + LLM in KAME mode) on a clock.

    A runner owns its components' streaming state, so concurrent sessions use separate runners
    (and separate component instances); nothing is shared at module level.
    """

    def __init__(self, front_end: FrontEnd, stt: StreamingSTT | None = None, llm: StreamingLLM | None = None,
                 config: SessionConfig | None = None, clock: Clock | None = None) -> None:
        self.front_end = front_end
        self.stt = stt
        self.llm = llm
        self.config = config or SessionConfig()
        self.clock = clock or VirtualClock()
        #: the trace of the session now running (None before the first run); read it from another thread
        #: with :meth:`SessionTrace.snapshot` to show a live session as it happens
        if self.config.mode == "kame" and (stt is None or llm is None):
            raise ValueError("KAME mode needs a streaming STT and an LLM (mode='moshi' runs without the oracle)")
        if self.config.mode not in ("kame", "moshi"):
            raise ValueError(f"unknown mode {self.config.mode!r}: expected 'kame' or 'moshi'")

    # -- entry points -------------------------------------------------------------------------------
    def run_sync(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace:
        """Run a whole session on this runner's clock and return its trace."""
        return self.clock.run(lambda: self.run(user_audio))

    async def run(self, user_audio: np.ndarray | UserAudioSource) -> SessionTrace:
        source = ArraySource(user_audio) if isinstance(user_audio, np.ndarray) else user_audio
        session = self._new_session()
        follow_session(source, session.trace)
        stop = asyncio.Event()
        tasks = []
        if self.stt is not None:
            tasks.append(asyncio.ensure_future(self._stt_loop(session)))
        if session.manager is not None:
            tasks.append(asyncio.ensure_future(session.manager.run(stop)))
        try:
            await self._frame_loop(session, source)
        finally:
            stop.set()
            session.stt_queue.put_nowait(None)  # harmless if the STT task already flushed and ended
            for task in tasks:
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        trace = session.trace.finish()
        annotate_onsets(trace)
        return trace

    # -- set-up -------------------------------------------------------------------------------------
    def _new_session(self) -> _Session:
        cfg = self.config
        trace = SessionTrace(mode=cfg.mode, config=cfg.to_json(), title=cfg.title)
        trace.config["clock"] = "virtual" if self.clock.is_virtual else "real-time"
        trace.provenance["front_end"] = self.front_end.provenance
        if isinstance(self.front_end, ListeningFrontEnd):
            self.front_end.realtime = not self.clock.is_virtual
        self.front_end.reset(cfg.seed)
        for key, part in getattr(self.front_end, "component_provenance", {}).items():
            trace.provenance.setdefault(key, part)
        conversation = Conversation()
        oracle_stream = OracleStream(self.front_end.tokenizer)
        manager = None
        if self.stt is not None:  # Moshi mode may still run STT: for VAD (forced delay, latency) and display
            trace.provenance["stt"] = self.stt.provenance
            # what a replay needs to reproduce the STT's event times exactly (kame_core.pipelines.replay)
            trace.config["stt_virtual_latency_s"] = float(getattr(self.stt, "virtual_latency_s", 0.0))
            self.stt.reset()
        if cfg.mode == "kame":
            assert self.stt is not None and self.llm is not None
            trace.provenance["llm"] = self.llm.provenance
            manager = OracleManager(cfg.oracle, self.llm, conversation, oracle_stream,
                                    self.front_end.tokenizer, self.clock, trace)
        return _Session(trace=trace, conversation=conversation, oracle_stream=oracle_stream,
                        gate=ForcedDelayGate(cfg.forced_delay_ms / 1000.0), manager=manager,
                        stt_queue=asyncio.Queue())

    # -- the 80 ms loop -----------------------------------------------------------------------------
    async def _frame_loop(self, session: _Session, source: UserAudioSource) -> None:
        clock, trace = self.clock, session.trace
        input_end: float | None = None
        last_text_t = 0.0
        held = False
        i = 0
        while True:
            frame_due = (i + 1) * FRAME_SECONDS
            await clock.sleep_until(frame_due)
            user_frame = source.read_frame(i)
            if user_frame is None:
                if input_end is None:
                    input_end = i * FRAME_SECONDS
                    trace.config["input_end_s"] = input_end  # the input's length, without the session's tail
                    if self.stt is not None:
                        session.stt_queue.put_nowait(None)  # flush now: the last final must not come late
                if self._should_stop(session, frame_due, input_end, last_text_t):
                    break
                user_frame = silence()
            elif self.stt is not None:
                session.stt_queue.put_nowait(user_frame)
            now = clock.now()
            hold = session.gate.holding(now)
            if hold != held:
                trace.add_event(now, EventKind.HOLD_START if hold else EventKind.HOLD_END,
                                delay_ms=self.config.forced_delay_ms)
                held = hold
            oracle = session.oracle_stream.next_token() if self.config.mode == "kame" else OracleToken()
            out = await clock.compute(self.front_end.step, user_frame, oracle.token, hold)
            record = FrameRecord(text_piece="" if hold else out.text_piece,
                                 text_token=None if hold else out.text_token, oracle=oracle, held=hold)
            audio = silence() if hold else np.asarray(out.audio, np.float32)
            trace.append_frame(record, user_frame, audio)
            if not record.text_is_padding:
                last_text_t = frame_due
                session.conversation.on_assistant_piece(record.text_piece)
                session.assistant_spoke_since_user = True
            if out.self_correction is not None and not hold:
                sc = out.self_correction
                revision = session.oracle_stream.revision if self.config.mode == "kame" else sc.revision
                trace.add_event(now, EventKind.SELF_CORRECTION, frame=i, abandoned_text=sc.abandoned_text,
                                revision=revision, new_text=sc.new_text)
            note_missed_deadline(clock, trace, i, frame_due)
            i += 1

    def _should_stop(self, session: _Session, now: float, input_end: float, last_text_t: float) -> bool:
        if now - input_end >= self.config.max_tail_s:
            return True
        if isinstance(self.front_end, ListeningFrontEnd) and self.front_end.busy:
            return False
        manager_idle = session.manager is None or not session.manager.busy
        quiet_since = max(input_end, last_text_t)
        return (manager_idle and session.oracle_stream.idle
                and now - quiet_since >= self.config.quiet_after_s)

    # -- STT ----------------------------------------------------------------------------------------
    async def _stt_loop(self, session: _Session) -> None:
        assert self.stt is not None
        loop = asyncio.get_running_loop()
        while True:
            frame = await session.stt_queue.get()
            events = await self.clock.compute(self.stt.flush if frame is None else self.stt.accept,
                                              *(() if frame is None else (frame,)))
            if events:  # one callback per batch keeps the events of one accept() in order
                if self.clock.is_virtual:
                    loop.call_later(self.stt.virtual_latency_s, self._on_stt_events, session, events)
                else:
                    self._on_stt_events(session, events)
            if frame is None:
                return

    def _on_stt_events(self, session: _Session, events: list[STTEvent]) -> None:
        for event in events:
            self._on_stt_event(session, event)
            if isinstance(self.front_end, ListeningFrontEnd):
                self.front_end.observe_stt(event)

    def _on_stt_event(self, session: _Session, event: STTEvent) -> None:
        now = self.clock.now()
        trace, conv = session.trace, session.conversation
        if event.kind == "speech_start":
            session.gate.on_speech_start()
            trace.add_event(now, EventKind.USER_SPEECH_START, audio_t=event.start)
            if session.assistant_spoke_since_user:
                said = conv.commit_assistant()
                session.assistant_spoke_since_user = False
                trace.add_event(now, EventKind.TURN_BOUNDARY, to="user", assistant_said=said)
        elif event.kind == "speech_end":
            session.gate.on_speech_end(event.end)
            trace.add_event(now, EventKind.USER_SPEECH_END, audio_t=event.end)
        elif event.kind == "partial":
            conv.on_partial(event.text)
            trace.add_event(now, EventKind.STT_PARTIAL, text=event.text)
        elif event.kind == "final":
            conv.on_final(event.text)
            trace.add_event(now, EventKind.STT_FINAL, text=event.text,
                            words=[[w.text, round(w.start, 3), round(w.end, 3)] for w in event.words])
        if session.manager is not None and event.kind in ("partial", "final"):
            session.manager.last_update_t = now
