"""What a live connection makes of each frame: one small sink per job, behind the session's one
:class:`~kame_core.session.fan_out.FrameFanOut` (:func:`connection_sinks` gives them in the order they must hear a
frame; the session's journal comes after them).

* :func:`frame_messages` -- the frame's own wire messages (live trace events, ``oracle_heard``, the text piece, the
  audio): a pure function of the frame and its encoded audio (:class:`AudioOut`: raw PCM or an Opus stream);
* :class:`FrameWire` -- sends them, every frame;
* :class:`OnsetSink` -- ``turn_onset`` messages, by the metrics' rule (:class:`~kame_core.analysis.metrics.LiveOnsets`):
  the first new assistant word of a user turn, once the turn is closed; ``latency_s`` is signed (negative: KAME
  started before the user finished), ``delay_s`` clipped at 0. The sinks after it read the onsets it found;
* :class:`HintLevelSink` -- one ``hint_level`` per HINT_LEVEL event the driver records that tells a revision's level
  differently from the last one sent (:func:`~kame_core.analysis.metrics.record_hint_levels`; nothing is worked out
  here), and at the end those of the finished trace;
* :class:`LatencySink` -- asks the :class:`~.latency_feed.LatencyFeed` (off the frame loop: this thread only copies the
  trace so far) for a turn's breakdown from the end of its first speech segment on, again as each step or request
  outcome comes in (:data:`STEP_KINDS`), oracle token counts at most every :data:`COUNTS_EVERY` frames, and only for
  the turns still open; at the end, what the driver's last steps changed, read from the finished trace as the
  Timeline reads the saved one;
* :class:`MetricsSink` -- the server's metrics (:class:`~.metrics.SessionMetricsTap`): every frame, every onset.

All of them run on the session's thread; ``post`` hands a list of wire messages to the connection's event loop.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.metrics import LiveOnsets, TurnOnset
from ..clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from ..record import events as ev
from ..record.trace import Event, EventKind, SessionTrace
from ..session import FrameOut
from . import notices as N
from . import protocol as P
from .latency_feed import LatencyFeed, Runner

if TYPE_CHECKING:
    from ..session.fan_out import SessionSink
    from .metrics import SessionMetricsTap

__all__ = ["COUNTS_EVERY", "STEP_KINDS", "AudioOut", "FrameWire", "HintLevelSink", "LatencySink", "MetricsSink",
           "OnsetSink", "connection_sinks", "frame_messages"]

Post = Callable[[list[bytes]], None]
TraceOf = Callable[[], SessionTrace | None]

#: events after which a turn's latency breakdown may show a new step or request outcome: the user's turns and
#: finals, the LLM requests' starts, first chunks and ends, the oracle's resets
STEP_KINDS = frozenset({EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END, EventKind.STT_FINAL,
                        EventKind.LLM_REQUEST_START, EventKind.LLM_FIRST_CHUNK, EventKind.LLM_REQUEST_FINISH,
                        EventKind.LLM_REQUEST_CANCEL, EventKind.LLM_ERROR, EventKind.ORACLE_RESET})
#: a breakdown whose only news is its oracle token counts (tokens appended or fed) is worked out again at most
#: this often (frames): the counts move on most frames while an answer streams
COUNTS_EVERY = 5


class AudioOut:
    """A connection's output audio on the wire: raw PCM (0x08) or one Opus stream (0x01, pages as they fill)."""

    def __init__(self, pcm_out: bool) -> None:
        import sphn

        self._opus = None if pcm_out else sphn.OpusStreamWriter(SAMPLE_RATE)

    def message(self, pcm: np.ndarray) -> bytes | None:
        """The message carrying ``pcm`` (None while the Opus stream has no full page)."""
        if self._opus is None:
            return P.message(P.PCM, P.pcm_to_bytes(pcm))
        pages = self._opus.append_pcm(np.asarray(pcm, np.float32))
        return P.message(P.AUDIO, pages) if pages else None


def frame_messages(frame: FrameOut, audio: bytes | None) -> list[bytes]:
    """The frame's own wire messages, in order: its live trace events, ``oracle_heard`` (from which frame the
    front-end hears a revision: its start token was fed), its text piece, then ``audio`` (its encoded audio)."""
    out = [P.notice(N.TraceEvent.of(event)) for event in frame.events if event.kind in P.LIVE_KINDS]
    oracle = frame.record.oracle
    if oracle.is_start and oracle.revision is not None:
        out.append(P.notice(N.OracleHeard(frame.index, round(frame.index * FRAME_SECONDS, 3), oracle.revision)))
    if frame.record.text_piece:
        out.append(P.message(P.TEXT, frame.record.text_piece.encode("utf-8")))
    if audio is not None:
        out.append(audio)
    return out


class FrameWire:
    """Sends each frame's own messages (:func:`frame_messages`)."""

    def __init__(self, post: Post, pcm_out: bool) -> None:
        self._post = post
        self._audio = AudioOut(pcm_out)

    def on_frame(self, frame: FrameOut) -> None:
        self._post(frame_messages(frame, self._audio.message(frame.output)))

    def on_end(self) -> None:
        pass


class OnsetSink:
    """``turn_onset`` for each turn whose onset became final with a frame (see the module docstring); :attr:`new`
    holds the onsets of the last frame, for the sinks after this one."""

    def __init__(self, post: Post) -> None:
        self._post = post
        self.onsets = LiveOnsets()
        #: the onsets that became final with the last frame
        self.new: list[TurnOnset] = []

    def on_frame(self, frame: FrameOut) -> None:
        output = frame.output
        rms = float(np.sqrt(np.mean(np.square(output, dtype=np.float64)))) if len(output) else 0.0
        self.new = self.onsets.add_frame(not frame.record.text_is_padding, rms, frame.events)
        if self.new:
            self._post([P.notice(N.TurnOnsetNotice.of(onset)) for onset in self.new])

    def on_end(self) -> None:
        self.new = []


class HintLevelSink:
    """``hint_level`` for each revision whose recorded level reads differently from the last one sent."""

    def __init__(self, post: Post, trace_of: TraceOf) -> None:
        self._post, self._trace_of = post, trace_of
        self._sent: dict[int, tuple[int, float | None]] = {}  # the last level sent per revision

    def on_frame(self, frame: FrameOut) -> None:
        if changed := self.changes(frame.events):
            self._post(changed)

    def on_end(self) -> None:
        """The levels of the finished trace (the last finals') that changed."""
        trace = self._trace_of()
        if trace is not None and (changed := self.changes(trace.events)):
            self._post(changed)

    def changes(self, events: Sequence[Event]) -> list[bytes]:
        """``hint_level`` for each HINT_LEVEL event among ``events`` that tells a revision's level differently from
        what was last sent."""
        out = []
        for event in events:
            if event.kind is not EventKind.HINT_LEVEL:
                continue
            level = ev.payload_of(event, lenient=True)
            assert isinstance(level, ev.HintLevel)
            known = (level.hint_level, level.spoken_ratio)
            if self._sent.get(level.revision) != known:
                self._sent[level.revision] = known
                out.append(P.notice(N.HintLevelNotice.of(level)))
        return out


class LatencySink:
    """Keeps each open turn's ``turn_latency`` following the trace (see the module docstring). ``run``: how the
    breakdowns' work is run (None: on a worker thread of the feed's own; tests run it at once)."""

    def __init__(self, post: Post, trace_of: TraceOf, onsets: OnsetSink, run: Runner | None = None) -> None:
        self._post, self._trace_of, self._onsets = post, trace_of, onsets
        self._feed = LatencyFeed(post, run)
        self._counts_due = False  # oracle tokens were appended or fed since the breakdowns were worked out
        self._worked_at = -COUNTS_EVERY  # the frame they were last worked out at

    def on_frame(self, frame: FrameOut) -> None:
        kinds = {event.kind for event in frame.events}
        oracle = frame.record.oracle
        fed = oracle.revision in self._feed.open_revisions and not oracle.is_start and not oracle.is_padding
        self._counts_due = self._counts_due or fed or EventKind.ORACLE_APPEND in kinds
        due = bool(self._onsets.new) or not kinds.isdisjoint(STEP_KINDS) or \
            (self._counts_due and frame.index - self._worked_at >= COUNTS_EVERY)
        trace = self._trace_of() if due else None
        if trace is not None:
            first, onsets = self._feed.first_open, self._onsets.onsets
            self._feed.ask(trace.snapshot(audio=False), first, onsets.so_far(first), onsets.settled)
            self._counts_due, self._worked_at = False, frame.index

    def on_end(self) -> None:
        """What the driver's last steps changed -- requests cancelled at the end, turns closed by the end -- read
        from the finished trace as the Timeline reads the saved one (every turn, the onsets measured on its audio);
        waits for the work under way first."""
        trace = self._trace_of()
        if trace is not None and len(trace.output_audio) < trace.n_frames * SAMPLES_PER_FRAME:
            trace = trace.snapshot()  # not finished (the driver failed)
        if changed := self._feed.close(trace):
            self._post(changed)


class MetricsSink:
    """Reports every frame, and each onset the :class:`OnsetSink` found, to the server's metrics."""

    def __init__(self, metrics: SessionMetricsTap, onsets: OnsetSink) -> None:
        self._metrics, self._onsets = metrics, onsets

    def on_frame(self, frame: FrameOut) -> None:
        for onset in self._onsets.new:
            self._metrics.on_onset(onset.latency_s or 0.0)
        self._metrics.on_frame(frame)

    def on_end(self) -> None:
        pass


def connection_sinks(post: Post, pcm_out: bool, trace_of: TraceOf = lambda: None,
                     metrics: SessionMetricsTap | None = None,
                     run_figures: Runner | None = None) -> tuple[SessionSink, ...]:
    """A connection's sinks, in the order they hear a frame: its own messages first, the onsets (read by the
    latency and metrics sinks), hint levels, latency breakdowns, then the metrics (when reported)."""
    onsets = OnsetSink(post)
    sinks: list[SessionSink] = [FrameWire(post, pcm_out), onsets, HintLevelSink(post, trace_of),
                                LatencySink(post, trace_of, onsets, run_figures)]
    if metrics is not None:
        sinks.append(MetricsSink(metrics, onsets))
    return tuple(sinks)
