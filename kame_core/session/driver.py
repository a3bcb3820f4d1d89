"""The session driver: one frame loop, one STT loop and one trace for every pipeline.

A session is one :class:`Session` value, made fresh by :meth:`SessionDriver.run`. The driver owns what every
way of answering a user shares:

* the **frame loop** on the 80 ms clock: frame ``i`` is handled at session time ``(i + 1) * 80 ms``, when its
  user audio is complete; the user frame goes to the STT loop, the pipeline makes the frame's inner-monologue
  piece, oracle token and output audio, and the trace records all four streams;
* the **STT loop** (:class:`~.stt_loop.STTLoop`): its events become trace events, update the conversation
  and the :class:`~.turns.UserTurnTracker`, then reach the pipeline;
* **when to stop**: after the input ended, once the pipeline is idle, the STT is done and the output was
  quiet for ``quiet_after_s`` (never later than ``max_tail_s``), or at once on :meth:`SessionDriver.stop`;
* **sinks**: a :class:`FrameSink` receives each frame as soon as it is made (a live server streams it), with
  the events recorded since the previous frame.

A :class:`Pipeline` (tandem / Moshi mode in :mod:`kame_core.pipelines.tandem`, the cascade in
:mod:`kame_core.pipelines.cascade`) adds only what is its own. The same code runs on the real-time and the
virtual clock, from a recording or from a live source that never ends.
"""
from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..analysis import metrics
from ..clock import FRAME_SECONDS, Clock, VirtualClock
from ..oracle.config import Conversation
from ..protocols import StreamingSTT, STTEvent
from ..record import events as ev
from ..record.trace import Event, EventKind, FrameRecord, SessionTrace, silence
from ..turns.tracker import TurnConfig, UserTurnTracker
from .ending import drop_frames, settle
from .sources import ArraySource, UserAudioSource, follow_session
from .stt_loop import STTLoop


@dataclass(frozen=True)
class FrameOut:
    """One frame as the driver made it: index, session time it was due, its record, both audio frames, and
    the trace events recorded since the previous frame."""

    index: int
    t: float
    record: FrameRecord
    user: np.ndarray
    output: np.ndarray
    events: tuple[Event, ...]


class FrameSink(Protocol):
    """Receives each frame as soon as it is made (called on the session's event loop; must be quick)."""

    def on_frame(self, frame: FrameOut) -> None: ...


@dataclass
class Session:
    """Everything one running session holds (a value: several run at once, each with its own)."""

    clock: Clock
    trace: SessionTrace
    conversation: Conversation
    user: UserTurnTracker
    stt: STTLoop | None = None
    #: index of the next frame to make
    frame: int = 0
    #: session time the user input ended (None while it goes on)
    input_end: float | None = None
    #: session time of the frame that last carried assistant text
    last_text_t: float = 0.0
    #: session time of the newest STT partial or final
    transcript_t: float | None = None
    assistant_spoke_since_user: bool = False
    stop_requested: bool = False
    tasks: list[asyncio.Future[Any]] = field(default_factory=list)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        """Run a background task for the session's lifetime (awaited when the session ends)."""
        task = asyncio.ensure_future(coroutine)
        self.tasks.append(task)
        return task


class PipelineConfig(Protocol):
    """What the driver reads of a pipeline's configuration (the rest is the pipeline's own)."""

    quiet_after_s: float
    max_tail_s: float
    title: str

    def to_json(self) -> dict[str, object]: ...


class Pipeline(Protocol):
    """One way of answering the user, on the driver's frames (see the module docstring)."""

    @property
    def mode(self) -> str: ...

    @property
    def config(self) -> PipelineConfig: ...

    @property
    def turn_config(self) -> TurnConfig: ...

    def begin(self, session: Session) -> None:
        """A session starts: record provenance and configuration, reset components, spawn tasks."""

    def interrupt(self, session: Session) -> bool:
        """The user started speaking: stop what must stop; True if an answer was cut off."""

    def on_stt_event(self, session: Session, event: STTEvent) -> None:
        """An STT event was applied to the session (recorded, conversation and user tracker updated)."""

    async def frame(self, session: Session, user_frame: np.ndarray) -> tuple[FrameRecord, np.ndarray]:
        """Make frame ``session.frame``: its record (inner monologue, oracle) and 1920 output samples."""

    def busy(self, session: Session) -> bool:
        """Whether it still has something to do (the session does not end while it has)."""

    async def end(self, session: Session) -> None:
        """The session ends: cancel and wait for what is still running."""


def note_missed_deadline(clock: Clock, trace: SessionTrace, frame: int, frame_due: float) -> None:
    """On a real-time clock, record a NOTE when frame ``frame`` (due at ``frame_due``) was made more than one
    frame period late; the live benchmarks count these."""
    late = clock.now() - (frame_due + FRAME_SECONDS)
    if not clock.is_virtual and late > 0:
        trace.record(clock.now(), ev.Note(what="missed frame deadline"), frame=frame, late_ms=round(late * 1000, 1))


class SessionDriver:
    """Runs sessions of one pipeline on a clock, one at a time (concurrent sessions use separate drivers and
    separate component instances; nothing is shared at module level)."""

    def __init__(self, pipeline: Pipeline, stt: StreamingSTT | None = None, clock: Clock | None = None) -> None:
        self.pipeline = pipeline
        self.stt = stt
        self.clock = clock or VirtualClock()
        self.session: Session | None = None
        self._stop_before_start = False

    @property
    def config(self) -> PipelineConfig:
        return self.pipeline.config

    # -- entry points -------------------------------------------------------------------------------
    def run_sync(self, user_audio: np.ndarray | UserAudioSource, sink: FrameSink | None = None) -> SessionTrace:
        """Run a whole session on this driver's clock (a fresh event loop) and return its trace."""
        try:
            return self.clock.run(lambda: self.run(user_audio, sink))
        except BaseException as err:
            drop_frames(err)  # the frames of a failed session hold it and the task that holds the error: a cycle
            raise

    async def run(self, user_audio: np.ndarray | UserAudioSource, sink: FrameSink | None = None) -> SessionTrace:
        """Run one session on the running event loop and return its finished trace."""
        source = ArraySource(user_audio) if isinstance(user_audio, np.ndarray) else user_audio
        session = self.session = self._new_session()
        session.stop_requested, self._stop_before_start = self._stop_before_start, False
        follow_session(source, session.trace)
        if session.stt is not None:
            session.spawn(session.stt.run())
        self.pipeline.begin(session)
        try:
            await self._frame_loop(session, source, sink)
        finally:
            failure: BaseException | None = None
            try:
                if session.stt is not None:
                    session.stt.flush()  # ends the STT task (harmless if it already flushed)
                await self.pipeline.end(session)
                failure = await settle(session.tasks)
            finally:  # what refers back to the session goes: the tasks (a failed one holds its error), the STT
                session.tasks.clear()  # loop's callback -- reference cycles that only a full collection frees
                if session.stt is not None:
                    session.stt.close()
            if failure is not None:
                raise failure
        trace = session.trace.finish()
        metrics.annotate_onsets(trace)
        metrics.record_hint_levels(trace, self.clock.now())  # what the session's last events made known
        return trace

    def stop(self) -> None:
        """End the running session at the next frame, whatever it is doing (a live client left); called before
        the session is set up (its thread just started), it ends at its first frame."""
        if self.session is not None:
            self.session.stop_requested = True
        else:
            self._stop_before_start = True

    # -- set-up -------------------------------------------------------------------------------------
    def _new_session(self) -> Session:
        config = self.pipeline.config
        trace = SessionTrace(mode=self.pipeline.mode, config=config.to_json(), title=config.title)
        trace.config["clock"] = "virtual" if self.clock.is_virtual else "real-time"
        session = Session(clock=self.clock, trace=trace, conversation=Conversation(),
                          user=UserTurnTracker(self.pipeline.turn_config))
        if self.stt is not None:
            trace.provenance["stt"] = self.stt.provenance
            # what a replay needs to reproduce the STT's event times exactly (kame_core.pipelines.replay)
            trace.config["stt_virtual_latency_s"] = float(getattr(self.stt, "virtual_latency_s", 0.0))
            self.stt.reset()
            session.stt = STTLoop(self.stt, self.clock, lambda events: self._apply_stt(session, events))
        return session

    # -- the 80 ms loop -----------------------------------------------------------------------------
    async def _frame_loop(self, session: Session, source: UserAudioSource, sink: FrameSink | None) -> None:
        clock, trace = self.clock, session.trace
        events_seen = 0
        revised = False  # an oracle revision was recorded: hint levels can become known
        while not session.stop_requested:
            i = session.frame
            frame_due = (i + 1) * FRAME_SECONDS
            await clock.sleep_until(frame_due)
            if session.stop_requested:
                break
            user_frame = source.read_frame(i)
            if user_frame is None:
                if session.input_end is None:
                    session.input_end = i * FRAME_SECONDS
                    trace.config["input_end_s"] = session.input_end  # the input's length, without the tail
                    if session.stt is not None:
                        session.stt.flush()  # now: the last final must not come late
                if self._should_stop(session, frame_due):
                    break
                user_frame = silence()
            elif session.stt is not None:
                session.stt.feed(user_frame)
            record, audio = await self.pipeline.frame(session, user_frame)
            trace.append_frame(record, user_frame, audio)
            if not record.text_is_padding:
                session.last_text_t = frame_due
                session.conversation.on_assistant_piece(record.text_piece)
                session.assistant_spoke_since_user = True
            note_missed_deadline(clock, trace, i, frame_due)
            session.frame = i + 1
            new_events = tuple(trace.events[events_seen:])
            kinds = {e.kind for e in new_events}
            revised = revised or EventKind.ORACLE_RESET in kinds  # no level without a revision (cascade, Moshi)
            if revised and not kinds.isdisjoint(metrics.HINT_LEVEL_NEWS):
                new_events += tuple(metrics.record_hint_levels(trace, clock.now()))
            events_seen = len(trace.events)
            if sink is not None:
                sink.on_frame(FrameOut(i, frame_due, record, user_frame, audio, new_events))

    def _should_stop(self, session: Session, now: float) -> bool:
        config = self.pipeline.config
        assert session.input_end is not None
        if now - session.input_end >= config.max_tail_s:
            return True
        if self.pipeline.busy(session) or (session.stt is not None and not session.stt.done):
            return False
        return now - max(session.input_end, session.last_text_t) >= config.quiet_after_s

    # -- STT events ---------------------------------------------------------------------------------
    def _apply_stt(self, session: Session, events: list[STTEvent]) -> None:
        for event in events:
            self._apply_stt_event(session, event)
            self.pipeline.on_stt_event(session, event)

    def _apply_stt_event(self, session: Session, event: STTEvent) -> None:
        now = self.clock.now()
        trace, conversation = session.trace, session.conversation
        session.user.on_event(event)
        if event.kind == "speech_start":
            trace.record(now, ev.UserSpeechStart(audio_t=event.start))
            interrupted = self.pipeline.interrupt(session)
            if session.assistant_spoke_since_user or interrupted:
                said = conversation.commit_assistant()
                session.assistant_spoke_since_user = False
                trace.record(now, ev.TurnBoundary(to="user", assistant_said=said, interrupted=interrupted))
        elif event.kind == "speech_end":
            trace.record(now, ev.UserSpeechEnd(audio_t=event.end))
        elif event.kind == "partial":
            conversation.on_partial(event.text)
            session.transcript_t = now
            decoded_to = _seconds_or_none(event.end)  # left out, not null, where the STT gave none
            trace.record(now, ev.SttPartial(text=event.text) if decoded_to is None
                         else ev.SttPartial(text=event.text, audio_to_s=decoded_to))
        elif event.kind == "final":
            conversation.on_final(event.text)
            session.transcript_t = now
            trace.record(now, ev.SttFinal(text=event.text,
                                          words=[[w.text, round(w.start, 3), round(w.end, 3)] for w in event.words]))


def _seconds_or_none(value: float) -> float | None:
    """A partial's audio end for the trace (ms precision); None where the STT gave none (0: a scripted STT's
    default, as no partial ends at the audio's start) or a non-finite one."""
    return round(float(value), 3) if math.isfinite(value) and value > 0 else None
