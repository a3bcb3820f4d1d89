"""Replay a recorded KAME run's back-ends, to re-run only its front-end (e.g. with another forced delay).

The STT and the oracle LLM of a tandem session never see what the front-end says about the *user's* turn:
the STT hears the user's audio, and the oracle manager starts, restarts and cancels requests on the user's
words and finals alone. So a recorded trace holds everything needed to play them back exactly on the
virtual clock: STT events with their times, and for each LLM request its chunks (``ORACLE_APPEND`` text)
and how it ended, relative to its start.

* :class:`ReplaySTT`  -- emits the recorded STT events at the frames (and modelled latency) they came at.
* :class:`ReplayLLM`  -- serves each request the recorded chunks of the request that started at the same
  virtual time, at the same offsets, and ends it as the recording did (finish, error; a cancel comes from
  the manager itself).
* :func:`rerun_front_end` -- a fresh :class:`~kame_core.pipelines.tandem.TandemRunner` with these and a new front-end.

Limit (stated in every re-run's provenance): in a multi-turn session the LLM's prompt also holds what the
assistant said in earlier turns; a replay serves the recorded answers even where the re-run said something
else. For the first turn (and single-turn scenarios) the replay is exact.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..analysis.trace_query import llm_requests
from ..clock import FRAME_SECONDS, SAMPLES_PER_FRAME, Clock, VirtualClock
from ..protocols import ChatMessage, FrontEnd, LLMError, STTEvent, Word
from ..record.events import SttFinal, SttPartial, payload_of
from ..record.trace import Event, EventKind, Provenance, SessionTrace
from ..session.config import SessionConfig
from ..session.live import release_front_end
from .tandem import TandemRunner

__all__ = ["ReplayUnavailable", "ReplaySTT", "ReplayLLM", "RecordedRequest", "recorded_input",
           "rerun_front_end", "REPLAY_LABEL"]

#: how a re-run's provenance describes itself
REPLAY_LABEL = "back-ends (STT, oracle LLM) replayed from the recording; front-end re-run now on the virtual clock"
_EPS = 1e-6
_STT_KINDS = (EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END, EventKind.STT_PARTIAL, EventKind.STT_FINAL)


class ReplayUnavailable(ValueError):
    """The trace lacks what a replay needs (e.g. an imported dialogue or a cascade run)."""


def _stt_event(e: Event) -> STTEvent:
    if e.kind is EventKind.USER_SPEECH_START:
        return STTEvent("speech_start", start=e.audio_t)
    if e.kind is EventKind.USER_SPEECH_END:
        return STTEvent("speech_end", end=e.audio_t)
    said = payload_of(e, lenient=True)
    if isinstance(said, SttPartial):
        return STTEvent("partial", text=str(said.text or ""))
    assert isinstance(said, SttFinal), e.kind
    words = tuple(Word(str(w[0]), float(w[1]), float(w[2])) for w in said.words or []
                  if isinstance(w, (list, tuple)) and len(w) == 3)
    return STTEvent("final", text=str(said.text or ""), words=words)


class ReplaySTT:
    """A :class:`~kame_core.protocols.StreamingSTT` that re-emits a trace's STT events.

    The runner applies an STT batch ``virtual_latency_s`` after the frame that produced it; the recording
    says that latency (``config.stt_virtual_latency_s``), so each event is emitted by the ``accept`` of its
    original frame and lands at its recorded time. Traces recorded before that field existed replay with
    no latency: events land at the end of their frame (at most 80 ms later); :attr:`exact` says which.
    """

    def __init__(self, trace: SessionTrace) -> None:
        latency = trace.config.get("stt_virtual_latency_s")
        self.exact = latency is not None
        self.virtual_latency_s = float(latency or 0.0)
        self._events = [(e.t - self.virtual_latency_s, _stt_event(e)) for e in trace.events_of(*_STT_KINDS)]
        original = trace.provenance.get("stt")
        self.provenance = Provenance("stt", model_id=original.model_id if original else "",
                                     version=original.version if original else "",
                                     label="replayed from the recording")
        self.reset()

    def reset(self) -> None:
        self._next = 0
        self._frames = 0

    def _until(self, t: float) -> list[STTEvent]:
        out = []
        while self._next < len(self._events) and self._events[self._next][0] <= t + _EPS:
            out.append(self._events[self._next][1])
            self._next += 1
        return out

    def accept(self, frame: np.ndarray) -> list[STTEvent]:
        self._frames += 1
        return self._until(self._frames * FRAME_SECONDS)

    def flush(self) -> list[STTEvent]:
        return self._until(float("inf"))


@dataclass(frozen=True)
class RecordedRequest:
    """One recorded LLM request: start time, chunks as (offset from start, text), and how it ended."""

    request: object
    start: float
    chunks: tuple[tuple[float, str], ...]
    outcome: str                 # "finished" | "cancelled" | "error" | "open"
    end_offset: float | None
    error: str = ""


def recorded_requests(trace: SessionTrace) -> list[RecordedRequest]:
    """The LLM requests of a trace, in start order, with chunk times relative to their start."""
    return [RecordedRequest(r.request, r.start_t, tuple((t - r.start_t, text) for t, text in r.chunks), r.outcome,
                            None if r.end_t is None else r.end_t - r.start_t, r.error)
            for r in llm_requests(trace)]


class ReplayLLM:
    """A :class:`~kame_core.protocols.StreamingLLM` serving a trace's recorded answers.

    A request is matched to the recorded request that started at the same virtual time (the oracle
    manager's polls and triggers do not depend on the front-end, so they coincide). A request with no
    recorded twin fails with an :class:`LLMError` saying so, which the session records like any failure.
    """

    def __init__(self, trace: SessionTrace) -> None:
        self.requests = recorded_requests(trace)
        original = trace.provenance.get("llm")
        self.provenance = Provenance("llm", model_id=original.model_id if original else "",
                                     version=original.version if original else "",
                                     label="replayed from the recording")

    def match(self, t: float) -> RecordedRequest | None:
        return next((r for r in self.requests if abs(r.start - t) <= _EPS), None)

    async def stream(self, messages: Sequence[ChatMessage], clock: Clock) -> AsyncIterator[str]:
        start = clock.now()
        recorded = self.match(start)
        if recorded is None:
            raise LLMError(f"replay: no recorded LLM request started at {start:.3f} s")
        for offset, text in recorded.chunks:
            await _wait_until(clock, start + offset)
            yield text
        if recorded.outcome == "finished":
            await _wait_until(clock, start + (recorded.end_offset or 0.0))
            return
        if recorded.outcome == "error":
            await _wait_until(clock, start + (recorded.end_offset or 0.0))
            raise LLMError(recorded.error or "replay: the recorded request failed")
        # cancelled (or still open when the recording ended): the manager cancels it at the same time
        await clock.sleep(3600.0)


async def _wait_until(clock: Clock, t: float) -> None:
    """Sleep until ``t`` only if it is ahead: a zero sleep would yield to other tasks due at the same
    instant and reorder what the recording did in one step (e.g. the last chunk and the finish)."""
    if t - clock.now() > _EPS:
        await clock.sleep_until(t)


def recorded_input(trace: SessionTrace) -> np.ndarray:
    """The user's input without the session's tail (the runner appends silence after the input ended)."""
    end = trace.config.get("input_end_s")
    if isinstance(end, (int, float)) and not isinstance(end, bool):
        n = int(round(float(end) / FRAME_SECONDS)) * SAMPLES_PER_FRAME
        return trace.user_audio[:n]
    audio = trace.user_audio
    frames = len(audio) // SAMPLES_PER_FRAME
    while frames > 0 and not np.any(audio[(frames - 1) * SAMPLES_PER_FRAME:frames * SAMPLES_PER_FRAME]):
        frames -= 1  # older traces: the tail is exact zeros
    return audio[:frames * SAMPLES_PER_FRAME]


def rerun_front_end(trace: SessionTrace, make_front_end: Callable[[], FrontEnd], *,
                    forced_delay_ms: int | None = None) -> SessionTrace:
    """Re-run ``trace`` (a recorded KAME run) with a fresh front-end and replayed back-ends.

    Raises :class:`ReplayUnavailable` when the trace is not a KAME run with recorded STT and LLM events.
    """
    if trace.mode != "kame":
        raise ReplayUnavailable(f"only KAME runs can be re-run (this run's mode is {trace.mode!r})")
    if not trace.events_of(*_STT_KINDS):
        raise ReplayUnavailable("the run has no recorded STT events to replay")
    if not trace.events_of(EventKind.LLM_REQUEST_START):
        raise ReplayUnavailable("the run has no recorded LLM requests to replay")
    changes: dict[str, object] = {}
    if forced_delay_ms is not None:
        changes["forced_delay_ms"] = int(forced_delay_ms)
    config = SessionConfig.from_trace(trace, mode="kame", **changes)
    stt = ReplaySTT(trace)
    runner = TandemRunner(make_front_end(), stt, ReplayLLM(trace), config, VirtualClock())
    try:
        out = runner.run_sync(recorded_input(trace))
    finally:
        release_front_end(runner)  # a pool slot of the neural model is free again
    note = REPLAY_LABEL + ("" if stt.exact else " (STT times to the frame: the recording has no STT latency)")
    out.provenance["replay"] = Provenance("replay", model_id=trace.title or "", label=note)
    out.config["replayed_from"] = {"mode": trace.mode, "forced_delay_ms": trace.config.get("forced_delay_ms", 0),
                                   "front_end": trace.provenance["front_end"].to_json()
                                   if "front_end" in trace.provenance else None}
    return out
