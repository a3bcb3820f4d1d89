"""Metrics computed from a trace alone, so they work the same for live, simulated, recorded and imported runs.

Times are on the trace's timeline: frame ``i`` of every stream sits at ``i * 80 ms``.

* **Response onset latency** (per user turn) = time of the first non-padding assistant text frame at or
  after the turn's first speech start, minus the end of the turn's last speech segment. Negative when the
  front-end starts before the user finished (KAME's "speak while thinking"). The audio variant uses the
  first output frame louder than -60 dBFS RMS.
* A **user turn** is a run of speech segments separated by less than ``turn_gap_s`` of silence
  (:func:`kame_core.turns.tracker.group_turns`, read through :mod:`kame_core.analysis.trace_query`).
* **Oracle revisions**: resets of the oracle stream. **Self-corrections**: events recorded by the front-end.
* **Transcript → oracle**: for each revision, the time from the STT update that its LLM request was built
  from to the frame where its start token was fed.
"""
from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..clock import FRAME_SECONDS, SAMPLES_PER_FRAME
from ..protocols import Word
from ..record import events as ev
from ..record.trace import Event, EventKind, SessionTrace
from ..turns.tracker import TurnConfig, UserTurn, group_turns
from .hint_levels import hint_level
from .trace_query import (
    LLMRequest,
    TokenUse,
    is_ident,
    llm_requests,
    oracle_revisions,
    request_spoken_ratios,
    self_corrections,
    speech_segments,
    user_turns,
)

__all__ = ["CARRY_OVER_GAP_S", "SILENCE_RMS", "LatencyStep", "LiveOnsets", "SessionMetrics", "TurnLatency",
           "TurnOnset", "UserTurn", "latency_breakdown", "latency_window",
           "HINT_LEVEL_NEWS", "record_hint_levels", "onset_of",
           "annotate_onsets",
           "median_onset_latency", "session_metrics", "speech_segments", "stt_word_lags", "transcript_to_oracle",
           "turn_onsets", "user_turns"]

SILENCE_RMS = 1e-3  # -60 dBFS


@dataclass(frozen=True)
class TurnOnset:
    turn: int
    user_end: float
    text_onset: float | None
    audio_onset: float | None

    @property
    def latency_s(self) -> float | None:
        return None if self.text_onset is None else self.text_onset - self.user_end

    @property
    def audio_latency_s(self) -> float | None:
        return None if self.audio_onset is None else self.audio_onset - self.user_end


@dataclass
class SessionMetrics:
    onsets: list[TurnOnset] = field(default_factory=list)
    oracle_revisions: int = 0
    self_corrections: int = 0
    llm_requests: int = 0
    llm_cancels: int = 0
    transcript_to_oracle_s: list[float] = field(default_factory=list)

    @property
    def onset_latency_s(self) -> float | None:
        """Onset latency of the first user turn (the headline number)."""
        return self.onsets[0].latency_s if self.onsets else None


#: output that continues, with pauses shorter than this, from before a user turn began is not a response to it
CARRY_OVER_GAP_S = 1.0


def _first_new_frame(flags: np.ndarray, lo: int, hi: int, gap: int) -> int | None:
    """First frame in ``[lo, hi)`` that is set and follows at least ``gap`` unset frames: the start of a new
    utterance, not the continuation of one that began before ``lo`` (barge-in over an earlier answer)."""
    for j in np.flatnonzero(flags[lo:hi]) + lo:
        if not flags[max(0, j - gap): j].any():
            return int(j)
    return None


def turn_onsets(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s) -> list[TurnOnset]:
    """Per user turn: the first frame where a *new* response starts (text, and audio above -60 dBFS) between
    the turn's start and the next turn's; output carried over from an earlier answer does not count."""
    n = trace.n_frames
    has_text = np.array([not f.text_is_padding for f in trace.frames], bool)
    out = trace.output_audio[: n * SAMPLES_PER_FRAME].reshape(n, SAMPLES_PER_FRAME)
    rms = np.sqrt(np.mean(out.astype(np.float64) ** 2, axis=1))
    turns = user_turns(trace, turn_gap_s)
    return [onset_of(turns, k, has_text, rms > SILENCE_RMS) for k in range(len(turns))]


def onset_of(turns: Sequence[UserTurn], k: int, has_text: np.ndarray, loud: np.ndarray) -> TurnOnset:
    """The onset of turn ``k`` given every frame's flags so far (the rule of :func:`turn_onsets`)."""
    gap = int(round(CARRY_OVER_GAP_S / FRAME_SECONDS))
    turn = turns[k]
    lo = int(round(turn.start / FRAME_SECONDS))
    hi = int(round(turns[k + 1].start / FRAME_SECONDS)) if k + 1 < len(turns) else len(has_text)
    f_text, f_audio = _first_new_frame(has_text, lo, hi, gap), _first_new_frame(loud, lo, hi, gap)
    return TurnOnset(turn=k, user_end=turn.end, text_onset=None if f_text is None else f_text * FRAME_SECONDS,
                     audio_onset=None if f_audio is None else f_audio * FRAME_SECONDS)


class LiveOnsets:
    """:func:`turn_onsets` followed frame by frame, for a live session: :meth:`add_frame` gives the onsets that
    became final with this frame -- a turn's, once the turn is closed (the user has been silent ``turn_gap_s``,
    or spoke again after a longer pause) and its response has started. The same rule, so the live delay and the
    Timeline's onset agree."""

    def __init__(self, turn_gap_s: float = TurnConfig.turn_gap_s) -> None:
        self.turn_gap_s = turn_gap_s
        self._text = bytearray()  # per frame: 1 if it has assistant text (bytes: an array of them is one copy)
        self._loud = bytearray()  # per frame: 1 if its output is above SILENCE_RMS
        self._segments: list[tuple[float, float]] = []
        self._speaking_since: float | None = None
        self._settled = 0  # turns before this index are reported (or passed without a response)

    def add_frame(self, text: bool, rms: float, events: Iterable[Event] = ()) -> list[TurnOnset]:
        """Add one output frame (whether it has assistant text, its RMS) and the events that came with it."""
        self._text.append(1 if text else 0)
        self._loud.append(1 if rms > SILENCE_RMS else 0)
        for event in events:
            if event.kind is EventKind.USER_SPEECH_START:
                self._speaking_since = event.audio_t
            elif event.kind is EventKind.USER_SPEECH_END and self._speaking_since is not None:
                self._segments.append((self._speaking_since, event.audio_t))
                self._speaking_since = None
        turns = group_turns(self._segments, self.turn_gap_s)
        now = len(self._text) * FRAME_SECONDS
        found: list[TurnOnset] = []
        while self._settled < len(turns):
            k = self._settled
            later = k + 1 < len(turns) or (self._speaking_since is not None
                                            and self._speaking_since - turns[k].end >= self.turn_gap_s)
            if not later and (self._speaking_since is not None or now - turns[k].end < self.turn_gap_s):
                break  # the turn may still grow
            onset = onset_of(turns, k, *self._flags())
            if onset.text_onset is None and not later:
                break  # closed, no response yet: it may still come
            self._settled += 1
            if onset.text_onset is not None:
                found.append(onset)
        return found

    @property
    def settled(self) -> int:
        """How many turns are settled (their onsets, or their lack of one, final)."""
        return self._settled

    def so_far(self, first: int = 0) -> list[TurnOnset]:
        """The onsets of turn ``first`` and the later ones as :func:`turn_onsets` reads the frames so far (for
        :func:`latency_breakdown` while the session goes on): a turn not settled may still grow, its response
        start later, its audio follow its text."""
        turns = group_turns(self._segments, self.turn_gap_s)
        if first >= len(turns):
            return []
        text, loud = self._flags()
        return [onset_of(turns, k, text, loud) for k in range(first, len(turns))]

    def _flags(self) -> tuple[np.ndarray, np.ndarray]:
        return np.frombuffer(bytes(self._text), np.bool_), np.frombuffer(bytes(self._loud), np.bool_)


@dataclass(frozen=True)
class LatencyStep:
    """One anchor of a turn's response: what happened and when (session time; None: it never happened)."""

    name: str
    t: float | None


@dataclass(frozen=True)
class TurnLatency:
    """Where the time went in answering one user turn: the anchors from the end of the user's speech to the first
    audible output (KAME: STT final, LLM request, first chunk, oracle reset; the cascade: STT final, LLM
    request, first token, TTS audio), and every LLM request made during the turn (the oracle's decisions)."""

    turn: int
    user_end: float
    steps: tuple[LatencyStep, ...]
    requests: tuple[LLMRequest, ...]
    forced_delay_s: float = 0.0

    def since_end(self, step: LatencyStep) -> float | None:
        return None if step.t is None else step.t - self.user_end

    def to_json(self, token_use: Mapping[int, TokenUse] | None = None) -> dict[str, Any]:
        """JSON-ready (the live protocol's ``turn_latency`` message): each anchor's session time and seconds
        after the end of the user's speech; each request of the turn with why it started, how it ended, and what
        became of its revision's oracle tokens (:func:`request_token_use`)."""
        def r3(value: float | None) -> float | None:
            return None if value is None else round(value, 3)
        return {"turn": self.turn, "user_end": r3(self.user_end), "forced_delay_s": self.forced_delay_s,
                "steps": [{"name": s.name, "t": r3(s.t), "since_end_s": r3(self.since_end(s))} for s in self.steps],
                "requests": [{"request": r.request, "since_end_s": r3(r.start_t - self.user_end),
                              "reason": r.reason, "outcome": r.outcome, "late": r.late, "revision": r.revision,
                              **request_token_use(r, token_use or {})} for r in self.requests]}


def request_token_use(request: LLMRequest, token_use: Mapping[int, TokenUse]) -> dict[str, int | None]:
    """What became of a request's output: its revision's oracle tokens appended / fed to the front-end / pending
    (None without a revision or token ids), and the words it streamed that never reached the oracle stream
    (they came after it was superseded or cancelled)."""
    use = token_use.get(request.revision) if request.revision is not None else None
    reached = len("".join(text for _, text in request.chunks).split())
    return {"tokens_appended": None if use is None else use.appended, "tokens_fed": None if use is None else use.fed,
            "tokens_pending": None if use is None else use.pending,
            "words_dropped": max(0, len(request.text.split()) - reached)}


def latency_breakdown(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s,
                      onsets: Sequence[TurnOnset] | None = None) -> list[TurnLatency]:
    """Per user turn, the response's anchors (see :class:`TurnLatency`). The request an answer is traced through
    is the first one started at or after the turn's final transcript (the one made from the whole turn).

    ``onsets``: the turns' onsets when already known (a live session's :class:`LiveOnsets`); then only those
    turns are broken down and the trace's audio is not read (a snapshot without audio will do)."""
    if onsets is None:
        onsets = turn_onsets(trace, turn_gap_s)
    onset_of_turn = {o.turn: o for o in onsets}
    turns = user_turns(trace, turn_gap_s)
    finals = [e for e, final in ev.payloads(trace, ev.SttFinal, lenient=True) if str(final.text or "").strip()]
    requests = llm_requests(trace)
    resets = {r.revision: r for r in oracle_revisions(trace)}
    delay = float(trace.config.get("forced_delay_ms", 0) or 0) / 1000
    out = []
    for k, turn in enumerate(turns):
        onset = onset_of_turn.get(k)
        if onset is None:
            continue
        lo, hi = turn.start, turns[k + 1].start if k + 1 < len(turns) else float("inf")
        final = next((e.t for e in finals if turn.end - FRAME_SECONDS <= e.t < hi), None)
        during = tuple(r for r in requests if lo <= r.start_t < hi)
        after = next((r for r in during if final is not None and r.start_t >= final - 1e-9), None)
        first_chunk = after.first_chunk_t if after is not None else None
        steps = [LatencyStep("end of user speech", turn.end), LatencyStep("STT final", final),
                 LatencyStep("LLM request", None if after is None else after.start_t)]
        if trace.mode == "cascade":
            steps += [LatencyStep("LLM first token", first_chunk), LatencyStep("TTS first audio", onset.audio_onset)]
        else:
            reset = resets.get(after.revision) if after is not None and after.revision is not None else None
            steps += [LatencyStep("first chunk", first_chunk),
                      LatencyStep("oracle reset", None if reset is None else reset.reset_t),
                      LatencyStep("first audible output", onset.audio_onset)]
        out.append(TurnLatency(k, turn.end, tuple(steps), during, delay))
    return out


def latency_window(trace: SessionTrace, first_turn: int, turn_gap_s: float = TurnConfig.turn_gap_s
                   ) -> SessionTrace:
    """The part of ``trace`` (its events in time order) that :func:`latency_breakdown` and
    :func:`~kame_core.analysis.trace_query.oracle_token_use` read for turn ``first_turn`` and the later ones: every
    speech event (the turns keep their numbers), the other events from a frame before that turn began (its final may
    come that early; its requests, their chunks and revisions all come after), and the frames from the first that
    feeds one of those revisions (revisions only grow along the frames). A live session breaks down its open
    turns on it: the work follows what those turns hold, not how long the session already is."""
    turns = user_turns(trace, turn_gap_s)
    start = turns[first_turn].start - FRAME_SECONDS if first_turn < len(turns) else float("inf")
    events = trace.events
    cut = bisect.bisect_left(events, start, key=lambda e: e.t)
    window = SessionTrace(mode=trace.mode, config=trace.config, title=trace.title, sample_rate=trace.sample_rate,
                          events=[e for e in events[:cut] if e.kind in _SPEECH_KINDS] + events[cut:])
    revisions = [r.revision for _, r in ev.payloads(window, ev.OracleReset, lenient=True)
                 if isinstance(r.revision, int)]
    if revisions:
        first, frames = min(revisions), trace.frames
        at = len(frames)
        while at > 0 and not _before(frames[at - 1].oracle.revision, first):
            at -= 1
        window.frames = frames[at:]
    return window


_SPEECH_KINDS = frozenset({EventKind.USER_SPEECH_START, EventKind.USER_SPEECH_END})


def _before(revision: int | None, first: int) -> bool:
    return revision is not None and revision < first


def annotate_onsets(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s) -> None:
    """Replace the trace's response-onset events with ones computed from its frames."""
    trace.events = [e for e in trace.events if e.kind is not EventKind.RESPONSE_ONSET]
    for onset in turn_onsets(trace, turn_gap_s):
        if onset.text_onset is None:
            continue
        trace.record(onset.text_onset, ev.ResponseOnset(
            turn=onset.turn, user_end=onset.user_end, latency_s=round(onset.latency_s or 0.0, 3),
            audio_latency_s=None if onset.audio_latency_s is None else round(onset.audio_latency_s, 3)))
    trace.events.sort(key=lambda e: e.t)


#: events after which a revision's hint level may become known or change: a new revision, a final, a user speech
#: segment (segments group the finals into utterances); nothing else changes a request's spoken ratio
#: (:func:`~kame_core.analysis.trace_query.request_spoken_ratios`)
HINT_LEVEL_NEWS = frozenset({EventKind.ORACLE_RESET, EventKind.STT_FINAL, EventKind.USER_SPEECH_START,
                             EventKind.USER_SPEECH_END})


def record_hint_levels(trace: SessionTrace, t: float | None = None) -> list[Event]:
    """The one place a run's hint levels are worked out: records a HINT_LEVEL event (at ``t``, default the last
    event's time) for every revision whose request's utterance has its final transcript and whose level or spoken
    ratio differs from the last one recorded for it (a later final of the same utterance can change it). Every
    reader -- the live sink, the Timeline, the metrics, the exports -- reads these events. Call it when
    :data:`HINT_LEVEL_NEWS` were recorded, and once when the session ends. Returns the events recorded."""
    revisions = [(reset.revision, reset.request) for _, reset in ev.payloads(trace, ev.OracleReset, lenient=True)
                 if is_ident(reset.revision) and is_ident(reset.request)]
    if not revisions:
        return []
    ratios = request_spoken_ratios(trace)
    known = {level.revision: (level.hint_level, level.spoken_ratio)
             for _, level in ev.payloads(trace, ev.HintLevel, lenient=True)}
    at = t if t is not None else (trace.events[-1].t if trace.events else 0.0)
    out = []
    for revision, request in revisions:
        ratio = ratios.get(request)
        if ratio is None or known.get(revision) == (level := (hint_level(ratio), ratio)):
            continue
        known[revision] = level
        out.append(trace.record(at, ev.HintLevel(revision=revision, hint_level=level[0], spoken_ratio=ratio,
                                                 request=request)))
    return out


def transcript_to_oracle(trace: SessionTrace) -> list[float]:
    """Seconds from each revision's triggering STT update to the frame its start token was fed."""
    return [r.start_frame * FRAME_SECONDS - r.transcript_t for r in oracle_revisions(trace)
            if r.transcript_t is not None and r.start_frame is not None]


def session_metrics(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s) -> SessionMetrics:
    requests = llm_requests(trace)
    return SessionMetrics(
        onsets=turn_onsets(trace, turn_gap_s),
        oracle_revisions=len(oracle_revisions(trace)),
        self_corrections=len(self_corrections(trace)),
        llm_requests=len(requests),
        llm_cancels=sum(r.outcome == "cancelled" for r in requests),
        transcript_to_oracle_s=transcript_to_oracle(trace),
    )


def median_onset_latency(traces: Iterable[SessionTrace]) -> float | None:
    """Median first-turn onset latency over sessions (sessions with no onset are left out)."""
    values = [m for t in traces if (m := session_metrics(t).onset_latency_s) is not None]
    return statistics.median(values) if values else None


def stt_word_lags(trace: SessionTrace, spoken: Sequence[Word], window_s: float = 6.0) -> list[float | None]:
    """For each word the user really said (times of its audio in the session), seconds from the end of its
    audio to the first STT partial or final at or after it that contains the word; ``None`` if none within
    ``window_s``. Words are compared case- and punctuation-insensitively."""
    said: list[tuple[Event, ev.SttPartial | ev.SttFinal]] = [*ev.payloads(trace, ev.SttPartial, lenient=True),
                                                           *ev.payloads(trace, ev.SttFinal, lenient=True)]
    updates = sorted(((e.t, set(_norm_words(str(p.text or "")))) for e, p in said), key=lambda item: item[0])
    lags: list[float | None] = []
    for word in spoken:
        target = _norm_words(word.text)
        lag = None
        for t, words in updates:
            if t < word.start:
                continue
            if t > word.end + window_s:
                break
            if target and all(w in words for w in target):
                lag = t - word.end
                break
        lags.append(lag)
    return lags


def _norm_words(text: str) -> list[str]:
    return [w for w in (re.sub(r"[^a-z0-9']", "", part.lower()) for part in text.split()) if w]
