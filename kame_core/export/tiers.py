"""A run's annotation tiers, as researchers' tools (Praat, ELAN, a spreadsheet) read them.

:func:`annotate` turns one :class:`~kame_core.record.trace.SessionTrace` into the tiers of :data:`TIER_NAMES`, times in
seconds (rounded to the millisecond), each covering the whole session ``[0, duration]``:

``user words``       interval tier: the STT's final words with their audio times.
``user STT``         interval tier: what the streaming STT said as it listened, each partial (``partial: …``) and
                     final (``final: …``) transcript from when it came until the next one.
``inner monologue``  interval tier: the front-end's text pieces joined into words
                     (:func:`~kame_core.analysis.trace_query.join_words`), each from its first piece's frame to the
                     end of its last piece's frame. A cascade has no front-end: its tier holds the words its TTS
                     speaks, at the frames they start.
``KAME speech``      interval tier: the words of the output audio. Where the run's front-end starts each word's
                     audio in the frame of its text (:data:`AUDIO_ALIGNED`: the CPU stand-in, the cascade, an
                     imported training dialogue) a word runs from its first to its last audible 10 ms of output
                     before the next word; elsewhere (a neural front-end, whose audio the trace does not align to
                     words) and for a word with no audible output, the inner monologue's timing.
``oracle``           interval tier: each oracle revision over the frames it was fed, ``rev 3 · hint 5: <text>``
                     (hint ``?`` where not known). A revision never fed has no interval (its reset is an event).
``turns``            interval tier: the user's turns (``user 1``) and the assistant's responses from their onset
                     (:func:`~kame_core.analysis.metrics.turn_onsets`) to their last active frame (``KAME 1``).
``latency``          interval tier: per answered user turn, from the end of the user's speech to the first audible
                     output (``turn 1: +0.33 s``), the Timeline's latency anchors; an answer that began before the
                     user stopped runs from its onset to that end (``turn 1: −0.12 s, before the end``). Where no
                     output was audible, the first text (``… (text)``).
``abandoned words``  interval tier: each self-correction's abandoned words over the frames they were said in
                     (``abandoned: <words> → rev 3``).
``events``           point tier: LLM requests started / finished / cancelled / failed, oracle resets,
                     self-corrections, forced-delay holds.

Within a tier intervals never overlap: each interval's end is clipped at the next one's start and empty ones are
dropped; gaps are filled with empty-label intervals (Praat's convention). Points are at least 1 ms apart (a point
at the same millisecond as the one before moves 1 ms on) and inside the session (a later one is placed at its end
and says when it happened). Every interval and point keeps its revision, hint level and request where it has one.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..analysis.metrics import SILENCE_RMS, turn_onsets
from ..analysis.trace_query import (
    FramedWord,
    front_end_words,
    llm_requests,
    oracle_revisions,
    self_corrections,
    user_turns,
)
from ..clock import FRAME_SECONDS, SAMPLES_PER_FRAME
from ..record import events as ev
from ..record.provenance import describe_run
from ..record.trace import Event, EventKind, SessionTrace

USER_WORDS, USER_STT, MONOLOGUE, SPEECH, ORACLE, TURNS, LATENCY, ABANDONED, EVENTS = (
    "user words", "user STT", "inner monologue", "KAME speech", "oracle", "turns", "latency", "abandoned words",
    "events")
#: every tier, in the order the exports write them (the last one is the point tier)
#: the tier of the Timeline's named regions, when a run is exported with them (after :data:`TIER_NAMES`)
REGIONS = "regions"
TIER_NAMES: tuple[str, ...] = (USER_WORDS, USER_STT, MONOLOGUE, SPEECH, ORACLE, TURNS, LATENCY, ABANDONED, EVENTS)
#: front-end provenance kinds whose output audio of a word starts in the frame of its text piece (the stand-in
#: speaks through :class:`kame_core.frontends.speech.Speaker`; an imported dialogue puts a word at its start)
AUDIO_ALIGNED = frozenset({"cpu-stand-in", "imported-training-dialogue"})
#: the label of the assistant's responses in the turns tier
ASSISTANT = "KAME"
#: the resolution of every exported time (EAF counts milliseconds)
RESOLUTION_S = 0.001
_AUDIBLE_BUCKET_S = 0.01
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Interval:
    """A labelled stretch of time (``text`` empty: a gap), with the structured fields of the CSV."""

    start: float
    end: float
    text: str
    revision: int | None = None
    hint_level: int | None = None
    request: int | None = None


@dataclass(frozen=True)
class Point:
    """A labelled instant, with the structured fields of the CSV."""

    t: float
    text: str
    revision: int | None = None
    hint_level: int | None = None
    request: int | None = None


@dataclass(frozen=True)
class IntervalTier:
    """Intervals covering ``[0, duration]`` in order, gaps included (empty ``text``)."""

    name: str
    intervals: tuple[Interval, ...]

    @property
    def labelled(self) -> list[Interval]:
        """The intervals that say something (the gaps left out)."""
        return [i for i in self.intervals if i.text]


@dataclass(frozen=True)
class PointTier:
    """Points in time order, at least :data:`RESOLUTION_S` apart."""

    name: str
    points: tuple[Point, ...]


Tier = IntervalTier | PointTier


@dataclass(frozen=True)
class Annotations:
    """One run's tiers and what the exports say about the run."""

    duration: float
    tiers: tuple[Tier, ...]
    run: str = ""
    title: str = ""
    #: what produced the run, in words (:func:`kame_core.record.provenance.describe_run`)
    provenance: str = ""

    def tier(self, name: str) -> Tier:
        """The tier called ``name`` (``KeyError`` if there is none)."""
        for tier in self.tiers:
            if tier.name == name:
                return tier
        raise KeyError(name)


def _ms(t: float) -> float:
    return round(round(float(t) / RESOLUTION_S) * RESOLUTION_S, 3)


def clean_label(text: str) -> str:
    """A label as the exports write it: stripped, line ends as ``\\n``, control characters (which XML cannot hold)
    replaced by spaces."""
    return _CONTROL.sub(" ", str(text).replace("\r\n", "\n").replace("\r", "\n")).strip()


def cover(name: str, items: Iterable[Interval], duration: float) -> IntervalTier:
    """The interval tier ``name`` of ``items``: times rounded to the millisecond and kept inside the session,
    sorted, each end clipped at the next start, empty ones dropped, gaps filled with empty labels."""
    duration = _ms(duration)
    kept = []
    for item in items:
        start, end = max(0.0, _ms(item.start)), min(duration, _ms(item.end))
        text = clean_label(item.text)
        if text and end > start:
            kept.append(replace(item, start=start, end=end, text=text))
    kept.sort(key=lambda i: (i.start, i.end))
    clipped = [replace(i, end=min(i.end, kept[k + 1].start)) if k + 1 < len(kept) else i
               for k, i in enumerate(kept)]
    out: list[Interval] = []
    cursor = 0.0
    for item in clipped:
        if item.end <= item.start:
            continue
        if item.start > cursor:
            out.append(Interval(cursor, item.start, ""))
        out.append(item)
        cursor = item.end
    if cursor < duration or not out:
        out.append(Interval(cursor, duration, ""))
    return IntervalTier(name, tuple(out))


def spread(name: str, items: Iterable[Point], duration: float) -> PointTier:
    """The point tier ``name`` of ``items``: times rounded to the millisecond, in order, at least 1 ms apart,
    inside ``[0, duration]`` (a point after the end is placed there and its label says when it happened)."""
    duration = _ms(duration)
    points = []
    for p in sorted(items, key=lambda p: p.t):
        t, text = max(0.0, _ms(p.t)), clean_label(p.text)
        if not text:
            continue
        if t > duration:
            text, t = f"{text} (at {t:.3f} s, after the recording ends)", duration
        points.append(replace(p, t=t, text=text))
    times = [p.t for p in points]
    for k in range(1, len(times)):  # forward: 1 ms after the one before
        times[k] = max(times[k], _ms(times[k - 1] + RESOLUTION_S))
    for k in range(len(times) - 1, -1, -1):  # backward: not past the end
        limit = duration if k == len(times) - 1 else _ms(times[k + 1] - RESOLUTION_S)
        times[k] = max(0.0, min(times[k], limit))
    return PointTier(name, tuple(replace(p, t=t) for p, t in zip(points, times)))


# ---------------------------------------------------------------------------------------------- the tiers
def user_words(trace: SessionTrace) -> list[Interval]:
    """The STT's final words with their times (``SttFinal.words``)."""
    out = []
    for _, final in ev.payloads(trace, ev.SttFinal, lenient=True):
        for w in final.words or []:
            if isinstance(w, (list, tuple)) and len(w) == 3:
                out.append(Interval(float(w[1]), float(w[2]), str(w[0])))
    return out


def monologue(trace: SessionTrace, words: Sequence[FramedWord] | None = None) -> list[Interval]:
    """The inner monologue's words, each over the frames of its pieces."""
    F = FRAME_SECONDS
    return [Interval(w.first_frame * F, (w.last_frame + 1) * F, w.text)
            for w in (front_end_words(trace) if words is None else words)]


def audio_aligned(trace: SessionTrace) -> bool:
    """Whether the run's output audio of a word starts in the frame of its text (see :data:`AUDIO_ALIGNED`)."""
    front = trace.provenance.get("front_end")
    return trace.mode == "cascade" or (front is not None and front.kind in AUDIO_ALIGNED)


def _audible(trace: SessionTrace) -> np.ndarray:
    """Per 10 ms bucket of the output audio: whether it is audible (RMS above -60 dBFS)."""
    bucket = max(1, int(round(_AUDIBLE_BUCKET_S * trace.sample_rate)))
    audio = np.asarray(trace.output_audio, np.float64)
    n = len(audio) // bucket
    if n == 0:
        return np.zeros(0, bool)
    rms = np.sqrt(np.mean(audio[: n * bucket].reshape(n, bucket) ** 2, axis=1))
    return np.asarray(rms > SILENCE_RMS, bool)


def kame_speech(trace: SessionTrace, words: Sequence[FramedWord] | None = None) -> list[Interval]:
    """The words of the output audio (see the module docstring for how they are timed)."""
    words = front_end_words(trace) if words is None else words
    timed = monologue(trace, words)
    if not audio_aligned(trace):
        return timed
    audible = _audible(trace)
    step = _AUDIBLE_BUCKET_S
    per_frame = FRAME_SECONDS / step
    out = []
    for k, (w, fallback) in enumerate(zip(words, timed)):
        lo = int(round(w.first_frame * per_frame))
        hi = int(round((words[k + 1].first_frame if k + 1 < len(words) else trace.n_frames) * per_frame))
        loud = np.flatnonzero(audible[lo:hi])
        if loud.size == 0:
            out.append(fallback)
        else:
            out.append(Interval((lo + int(loud[0])) * step, (lo + int(loud[-1]) + 1) * step, w.text))
    return out


def _hint(level: int | None) -> str:
    return "?" if level is None else str(level)


def oracle(trace: SessionTrace) -> list[Interval]:
    """One interval per oracle revision over the frames it was fed (revisions never fed have none)."""
    F = FRAME_SECONDS
    out = []
    for r in oracle_revisions(trace):
        if r.start_frame is None:
            continue
        last = max(r.last_frame if r.last_frame is not None else r.start_frame, r.start_frame)
        label = f"rev {r.revision} · hint {_hint(r.hint_level)}" + (f": {r.text}" if r.text else "")
        out.append(Interval(r.start_frame * F, (last + 1) * F, label, revision=r.revision, hint_level=r.hint_level,
                            request=r.request))
    return out


def turns(trace: SessionTrace) -> list[Interval]:
    """The user's turns and the assistant's responses, from their onset to their last active frame (text, or
    output above -60 dBFS) before the next user turn."""
    F = FRAME_SECONDS
    n = trace.n_frames
    out_audio = np.zeros(n * SAMPLES_PER_FRAME, np.float64)
    out_audio[: min(len(trace.output_audio), out_audio.size)] = trace.output_audio[: out_audio.size]
    loud = np.sqrt(np.mean(out_audio.reshape(n, SAMPLES_PER_FRAME) ** 2, axis=1)) > SILENCE_RMS
    active = np.asarray([not f.text_is_padding for f in trace.frames], bool) | loud
    user = user_turns(trace)
    out = [Interval(t.start, t.end, f"user {k + 1}") for k, t in enumerate(user)]
    for o in turn_onsets(trace):
        onset = o.text_onset if o.text_onset is not None else o.audio_onset
        if onset is None:
            continue
        lo = int(round(onset / F))
        hi = int(round(user[o.turn + 1].start / F)) if o.turn + 1 < len(user) else n
        on = np.flatnonzero(active[lo:hi])
        end = lo + 1 if on.size == 0 else lo + int(on[-1]) + 1
        out.append(Interval(onset, end * F, f"{ASSISTANT} {o.turn + 1}"))
    return out


def user_stt(trace: SessionTrace) -> list[Interval]:
    """The streaming STT's partial and final transcripts, each from when it came until the next one."""
    said = sorted([(e.t, "partial", p.text) for e, p in ev.payloads(trace, ev.SttPartial, lenient=True)]
                  + [(e.t, "final", p.text) for e, p in ev.payloads(trace, ev.SttFinal, lenient=True)],
                  key=lambda s: s[0])
    ends = [t for t, _, _ in said[1:]] + [trace.duration]
    return [Interval(t, end, f"{kind}: {text}") for (t, kind, text), end in zip(said, ends)
            if str(text or "").strip()]


def _signed(seconds: float) -> str:
    return f"{'+' if seconds >= 0 else '−'}{abs(seconds):.2f} s"


def latency(trace: SessionTrace) -> list[Interval]:
    """Per answered user turn: from the end of the user's speech to the first audible output (else the first
    text), or from an earlier onset to that end."""
    out = []
    for o in turn_onsets(trace):
        heard = o.audio_onset is not None
        onset = o.audio_onset if heard else o.text_onset
        if onset is None:
            continue
        label = f"turn {o.turn + 1}: {_signed(onset - o.user_end)}" + ("" if heard else " (text)")
        if onset >= o.user_end:
            out.append(Interval(o.user_end, onset, label))
        else:
            out.append(Interval(onset, o.user_end, label + ", before the end"))
    return out


def abandoned(trace: SessionTrace) -> list[Interval]:
    """Each self-correction's abandoned words over the frames they were said in."""
    F = FRAME_SECONDS
    out = []
    for _, c in self_corrections(trace):
        if not c.abandoned_frames or not c.abandoned_text.strip():
            continue
        to = f" → rev {c.revision}" if c.revision is not None else ""
        out.append(Interval(min(c.abandoned_frames) * F, (max(c.abandoned_frames) + 1) * F,
                            f"abandoned: {c.abandoned_text.strip()}{to}", revision=c.revision))
    return out


def events(trace: SessionTrace) -> list[Point]:
    """LLM requests (started, and how they ended), oracle resets, self-corrections, forced-delay holds."""
    out = []
    ended = {"finished": "finished", "cancelled": "cancelled", "error": "failed"}
    for q in llm_requests(trace):
        out.append(Point(q.start_t, f"LLM request {q.request} started", request=q.request))
        if q.end_t is not None and q.outcome in ended:
            what = f"LLM request {q.request} {ended[q.outcome]}" + (f": {q.error}" if q.error else "")
            out.append(Point(q.end_t, what, revision=q.revision, request=q.request))
    for r in oracle_revisions(trace):
        out.append(Point(r.reset_t, f"oracle reset: rev {r.revision} · hint {_hint(r.hint_level)}",
                         revision=r.revision, hint_level=r.hint_level, request=r.request))
    for t, c in self_corrections(trace):
        to = f" → rev {c.revision}" if c.revision is not None else ""
        out.append(Point(t, f"self-correction{to}", revision=c.revision))
    for e in trace.events_of(EventKind.HOLD_START, EventKind.HOLD_END):
        out.append(Point(e.t, _hold_label(e)))
    for e in trace.events_of(EventKind.END_OF_TURN):
        by = " (by the sound)" if e.data.get("by") == "audio" else ""
        out.append(Point(e.t, f"end of turn p {float(e.data['p_end']):.2f}{by}"))
    return out


def _hold_label(event: Event) -> str:
    """"hold starts (forced delay)", or for a floor policy's hold what it rested on."""
    what = "hold starts" if event.kind is EventKind.HOLD_START else "hold ends"
    floor = event.data.get("floor")
    if not floor:
        return f"{what} (forced delay)"
    p_end, sound, silence = (event.data.get(k) for k in ("p_end", "p_end_audio", "silence_s"))
    basis = ([f"p {p_end:.2f}"] if isinstance(p_end, (int, float)) else []) + \
        ([f"sound p {sound:.2f}"] if isinstance(sound, (int, float)) else []) + \
        ([f"silence {silence:.2f} s"] if isinstance(silence, (int, float)) else [])
    return f"{what} (floor: {floor}{'; ' + ', '.join(basis) if basis else ''})"


def annotate(trace: SessionTrace, run: str = "", title: str = "",
             regions: Sequence[tuple[str, float, float]] = ()) -> Annotations:
    """Every tier of ``trace`` (:data:`TIER_NAMES`), and with ``regions`` (name, start, end: the Timeline's named
    regions) a :data:`REGIONS` tier of them last (where two overlap, the earlier ends where the next starts); a run
    without frames is refused (``ValueError``)."""
    if trace.n_frames == 0:
        raise ValueError("the run has no frames (nothing to annotate)")
    duration = trace.duration
    words = front_end_words(trace)
    tiers: tuple[Tier, ...] = (
        cover(USER_WORDS, user_words(trace), duration),
        cover(USER_STT, user_stt(trace), duration),
        cover(MONOLOGUE, monologue(trace, words), duration),
        cover(SPEECH, kame_speech(trace, words), duration),
        cover(ORACLE, oracle(trace), duration),
        cover(TURNS, turns(trace), duration),
        cover(LATENCY, latency(trace), duration),
        cover(ABANDONED, abandoned(trace), duration),
        spread(EVENTS, events(trace), duration),
    )
    if regions:
        tiers += (cover(REGIONS, (Interval(a, b, name) for name, a, b in regions), duration),)
    return Annotations(duration=_ms(duration), tiers=tiers, run=run, title=title or trace.title,
                       provenance=describe_run(trace).headline)
