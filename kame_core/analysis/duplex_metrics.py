"""Full-Duplex-Bench timing metrics (v1 / v1.5 definitions), computed from a trace alone.

Beside our response onset latency (:mod:`kame_core.analysis.metrics`), the field compares full-duplex systems with
Full-Duplex-Bench's definitions (facts in ``../shared/KAME_OFFICIAL_SERVER.md``):

* **Takeover** (per user turn): the model took the turn unless it said nothing, or spoke less than 1 s and
  at most 3 words (a backchannel). The takeover rate is the share of turns with a takeover.
* **Turn-taking latency** (per takeover turn): start of the model's first output word minus the end of the
  user's turn. Reported signed (KAME may start early) and, as FD-Bench reports it, with negative values
  clipped to 0 -- its mean is over takeover turns only, and that denominator is reported with it.
* **Heard latency** (per takeover turn; ours, beside theirs): when the response is first heard -- its first loud
  output frame, refined to the first 20 ms window above -60 dBFS (:mod:`.heard`) -- minus the end of the user's
  turn; median, p10, p90 and early starts. The text onset can lead the sound (a front-end's padding, a TTS's
  lead-in), and an ASR's word timestamps lead it too; the listener hears this one.
* **Stop latency** (per user turn that begins while the model is speaking -- the user interrupts): from the
  onset of the user's overlapping speech to the model going silent (the end of the model's speech segment
  that the onset fell into).

How a trace maps onto them: the user's turns are :func:`~kame_core.analysis.trace_query.user_turns`; the model's
response to turn k is its output between the start of turn k and the start of turn k+1, beginning at the
turn's response onset (:func:`~kame_core.analysis.metrics.turn_onsets`: a *new* utterance, not the continuation of
an earlier one); its words are the inner-monologue words from there, its span runs to the last frame with
output speech (above -60 dBFS) or text. The model's speech segments are output frames above -60 dBFS, with
gaps shorter than ``speech_gap_s`` bridged.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from ..record.trace import SessionTrace
from ..turns.tracker import TurnConfig
from .heard import HeardLatency, first_heard
from .metrics import SILENCE_RMS, turn_onsets
from .trace_query import user_turns

#: FD-Bench's backchannel rule: a response shorter than this and of at most BACKCHANNEL_WORDS is no takeover
BACKCHANNEL_MAX_S = 1.0
BACKCHANNEL_WORDS = 3
#: silences in the model's output shorter than this do not end its speech segment
SPEECH_GAP_S = 0.32


def is_takeover(duration_s: float, words: int) -> bool:
    """FD-Bench's rule: a response takes the turn unless it is empty, or shorter than 1 s with at most 3 words
    (a backchannel)."""
    if words <= 0:
        return False
    return not (duration_s < BACKCHANNEL_MAX_S and words <= BACKCHANNEL_WORDS)


@dataclass(frozen=True)
class TurnTaking:
    """The model's response to one user turn."""

    turn: int
    user_end: float
    #: start of the model's first output word (None: it said nothing in answer to this turn)
    response_start: float | None
    #: end of its last output frame with speech or text before the next turn
    response_end: float | None
    words: int
    #: when the response is first heard: its first loud output frame, to the 20 ms window (:mod:`.heard`)
    heard_start: float | None = None

    @property
    def duration_s(self) -> float:
        if self.response_start is None or self.response_end is None:
            return 0.0
        return self.response_end - self.response_start

    @property
    def takeover(self) -> bool:
        """It took the turn: it said something, and not a backchannel (< 1 s and <= 3 words)."""
        return self.response_start is not None and is_takeover(self.duration_s, self.words)

    @property
    def latency_s(self) -> float | None:
        """Signed turn-taking latency (None without a takeover)."""
        return None if not self.takeover or self.response_start is None else self.response_start - self.user_end

    @property
    def clipped_latency_s(self) -> float | None:
        """Turn-taking latency as FD-Bench reports it: negative values clipped to 0."""
        return None if self.latency_s is None else max(0.0, self.latency_s)

    @property
    def heard_latency_s(self) -> float | None:
        """Signed latency by the audio (what a listener waits; None without a takeover or without sound)."""
        return None if not self.takeover or self.heard_start is None else self.heard_start - self.user_end


@dataclass(frozen=True)
class Interruption:
    """A user turn that began while the model was speaking."""

    turn: int
    user_onset: float
    #: when the model went silent (None: it was still speaking when the trace ended)
    model_stop: float | None

    @property
    def stop_latency_s(self) -> float | None:
        return None if self.model_stop is None else self.model_stop - self.user_onset


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass
class DuplexSummary:
    """FD-Bench timing over many turns (one run, or many runs pooled)."""

    turns: list[TurnTaking] = field(default_factory=list)
    interruptions: list[Interruption] = field(default_factory=list)

    @property
    def takeovers(self) -> int:
        return sum(t.takeover for t in self.turns)

    @property
    def takeover_rate(self) -> float | None:
        return self.takeovers / len(self.turns) if self.turns else None

    @property
    def mean_latency_s(self) -> float | None:
        """Mean signed turn-taking latency over takeover turns."""
        return _mean([t.latency_s for t in self.turns if t.latency_s is not None])

    @property
    def mean_clipped_latency_s(self) -> float | None:
        """FD-Bench's turn-taking latency: mean of the clipped values over takeover turns (n = ``takeovers``)."""
        return _mean([t.clipped_latency_s for t in self.turns if t.clipped_latency_s is not None])

    @property
    def heard(self) -> HeardLatency:
        """Heard latency over the takeover turns that made a sound: median, p10, p90, early starts."""
        return HeardLatency.of([t.heard_latency_s for t in self.turns if t.heard_latency_s is not None])

    @property
    def mean_stop_latency_s(self) -> float | None:
        return _mean([i.stop_latency_s for i in self.interruptions if i.stop_latency_s is not None])

    @property
    def never_stopped(self) -> int:
        return sum(i.model_stop is None for i in self.interruptions)

    def to_json(self) -> dict[str, object]:
        """The headline numbers, JSON-ready (None where there is nothing to average)."""
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)
        return {"turns": len(self.turns), "takeovers": self.takeovers, "takeover_rate": r(self.takeover_rate),
                "latency_signed_s": r(self.mean_latency_s), "latency_clipped_s": r(self.mean_clipped_latency_s),
                "latency_n": self.takeovers, **self.heard.to_json(), "interruptions": len(self.interruptions),
                "stop_latency_s": r(self.mean_stop_latency_s), "never_stopped": self.never_stopped}


def speech_frames(trace: SessionTrace) -> np.ndarray:
    """Per frame: the model's output audio is louder than -60 dBFS."""
    n = trace.n_frames
    out = trace.output_audio[: n * SAMPLES_PER_FRAME].reshape(n, SAMPLES_PER_FRAME).astype(np.float64)
    return np.sqrt(np.mean(out ** 2, axis=1)) > SILENCE_RMS


def model_speech_segments(trace: SessionTrace, gap_s: float = SPEECH_GAP_S) -> list[tuple[float, float]]:
    """(start, end) of the model's speech segments: loud output frames, gaps shorter than ``gap_s`` bridged."""
    loud = np.flatnonzero(speech_frames(trace))
    segments: list[tuple[float, float]] = []
    gap = gap_s / FRAME_SECONDS
    for f in loud:
        if segments and f - segments[-1][1] / FRAME_SECONDS < gap:
            segments[-1] = (segments[-1][0], (f + 1) * FRAME_SECONDS)
        else:
            segments.append((f * FRAME_SECONDS, (f + 1) * FRAME_SECONDS))
    return segments


def _words_from(trace: SessionTrace, lo: int, hi: int) -> int:
    return len(trace.spoken_text(lo, hi).split())


def duplex_metrics(trace: SessionTrace, turn_gap_s: float = TurnConfig.turn_gap_s,
                   speech_gap_s: float = SPEECH_GAP_S) -> DuplexSummary:
    """FD-Bench timing of one run (see the module docstring)."""
    turns = user_turns(trace, turn_gap_s)
    n = trace.n_frames
    loud = speech_frames(trace)
    has_text = np.array([not f.text_is_padding for f in trace.frames], bool)
    active = loud | has_text
    summary = DuplexSummary()
    for onset in turn_onsets(trace, turn_gap_s):
        k = onset.turn
        hi = min(n, int(round(turns[k + 1].start / FRAME_SECONDS))) if k + 1 < len(turns) else n
        start = onset.text_onset
        if start is None:
            summary.turns.append(TurnTaking(k, onset.user_end, None, None, 0))
            continue
        lo = int(round(start / FRAME_SECONDS))
        last = np.flatnonzero(active[lo:hi])
        end = (lo + int(last[-1]) + 1) * FRAME_SECONDS if last.size else start + FRAME_SECONDS
        heard = None if onset.audio_onset is None else first_heard(  # within the loud frame the onset names
            trace.output_audio[: n * SAMPLES_PER_FRAME], SAMPLE_RATE, from_s=onset.audio_onset,
            until_s=onset.audio_onset + FRAME_SECONDS)
        summary.turns.append(TurnTaking(k, onset.user_end, start, end, _words_from(trace, lo, hi), heard))
    segments = model_speech_segments(trace, speech_gap_s)
    for k, turn in enumerate(turns):
        inside = next((s for s in segments if s[0] < turn.start < s[1]), None)
        if inside is None:
            continue
        stopped = inside[1] if inside[1] < n * FRAME_SECONDS or not loud[-1] else None
        summary.interruptions.append(Interruption(k, turn.start, stopped))
    return summary


def pool(summaries: Iterable[DuplexSummary]) -> DuplexSummary:
    """Many runs as one sample set (FD-Bench averages over samples, i.e. turns)."""
    out = DuplexSummary()
    for s in summaries:
        out.turns.extend(s.turns)
        out.interruptions.extend(s.interruptions)
    return out
