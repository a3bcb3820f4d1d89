"""Forced-delay re-runs of a recorded KAME run, and the latency–quality curve of one input.

A re-run replays the recording's back-ends (:mod:`kame_core.pipelines.replay`: STT events and oracle LLM
chunks at their recorded times, which do not depend on the delay) and re-runs only the front-end, held
silent until ``delay`` after the user's speech, on the virtual clock. For each delay it reports the onset
latency, the oracle the front-end had when it started speaking, what it said, and a score of that answer
(:func:`demo.scoring.score_answer`; the offline proxy unless a judge is wired in and keyed).
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from kame_core.analysis.metrics import turn_onsets, user_turns
from kame_core.analysis.trace_query import llm_requests, revision_at
from kame_core.clock import FRAME_SECONDS
from kame_core.pipelines.replay import rerun_front_end
from kame_core.protocols import FrontEnd
from kame_core.record.trace import SessionTrace

from .scoring import AnswerScore, Judge, score_answer
from .timeline import format_latency

#: the delays of the latency–quality curve (seconds)
DELAYS_S: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
MAX_DELAY_S = 3.0
#: quoted from the KAME paper (arXiv 2510.02327), spoken MT-Bench judge scores: (label, onset s, score)
PAPER_POINTS: tuple[tuple[str, float | None, float], ...] = (
    ("KAME + gpt-4.1", 0.0, 6.43), ("cascaded Unmute", 2.1, 7.70), ("Moshi", None, 2.05))


@dataclass(frozen=True)
class OracleAtStart:
    """The oracle revision the front-end had been fed when it started to speak, and how much of it."""

    revision: int
    hint_level: Any
    known_text: str     # the oracle pieces fed up to the onset frame
    full_text: str      # the whole revision as the back-end wrote it


@dataclass
class DelayOutcome:
    """One forced-delay run of one input (``trace`` is the re-run; ``score`` None when no reference)."""

    delay_s: float
    trace: SessionTrace
    onset_latency_s: float | None
    oracle: OracleAtStart | None
    answer: str
    score: AnswerScore | None


def first_answer(trace: SessionTrace) -> str:
    """What the assistant said in reply to the first user turn (up to the next user turn)."""
    turns = user_turns(trace)
    if not turns:
        return trace.spoken_text()
    end = int(round(turns[1].start / FRAME_SECONDS)) if len(turns) > 1 else None
    return trace.spoken_text(int(round(turns[0].start / FRAME_SECONDS)), end)


def oracle_at_onset(trace: SessionTrace) -> OracleAtStart | None:
    """The oracle the front-end had when its first answer began (None: it started before any oracle)."""
    onsets = turn_onsets(trace)
    if not onsets or onsets[0].text_onset is None:
        return None
    at = revision_at(trace, int(round(onsets[0].text_onset / FRAME_SECONDS)))
    if at is None:
        return None
    return OracleAtStart(revision=at.revision.revision, hint_level=at.revision.hint_level, known_text=at.fed_text,
                         full_text=at.revision.text)


def reference_answers(references: Sequence[str], kame: SessionTrace) -> tuple[list[str], str]:
    """The references to score against, and where they come from (said beside every score)."""
    refs = [r for r in references if r and r.strip()]
    if refs:
        return refs, "the scenario's reference answers"
    finals = [r.text for r in llm_requests(kame) if r.outcome == "finished" and r.text]
    if finals:
        return [finals[-1]], ("fallback: the recorded KAME run's final oracle text (this scenario has no "
                              "reference answers)")
    return [], "no reference answers and no finished oracle in the recording: no score"


def run_delay(kame: SessionTrace, delay_s: float, make_front_end: Callable[[], FrontEnd],
              references: Sequence[str], *, cache: MutableMapping[Any, DelayOutcome] | None = None,
              cache_key: Any = None, judge: Judge | None = None) -> DelayOutcome:
    """Re-run ``kame`` with a forced delay of ``delay_s`` (0–3 s); cached under ``(cache_key, ms)``."""
    if not 0.0 <= delay_s <= MAX_DELAY_S:
        raise ValueError(f"forced delay {delay_s} s: choose between 0 and {MAX_DELAY_S:g} s")
    ms = int(round(delay_s * 1000))
    key = (cache_key, ms)
    if cache is not None and key in cache:
        return cache[key]
    trace = rerun_front_end(kame, make_front_end, forced_delay_ms=ms)
    onsets = turn_onsets(trace)
    answer = first_answer(trace)
    score = score_answer(answer, references, judge) if references else None
    outcome = DelayOutcome(delay_s=ms / 1000, trace=trace,
                           onset_latency_s=onsets[0].latency_s if onsets else None,
                           oracle=oracle_at_onset(trace), answer=answer, score=score)
    if cache is not None:
        cache[key] = outcome
    return outcome


#: the provenance entries that decide what a front-end says (the front-end itself and its local model)
_FRONT_END_PARTS = ("front_end", "front_end_model")


def _front_end_of(trace: SessionTrace) -> tuple[tuple[str, str, str, str], ...]:
    return tuple((name, p.kind, p.model_id, p.version) for name in _FRONT_END_PARTS
                 if (p := trace.provenance.get(name)) is not None)


def _named(parts: tuple[tuple[str, str, str, str], ...]) -> str:
    return " + ".join(f"{model_id or kind}" + (f" version {version}" if version else "")
                      for _name, kind, model_id, version in parts) or "an unrecorded front-end"


def front_end_difference(recorded: SessionTrace, rerun: SessionTrace) -> str:
    """One sentence when the re-run's front-end is not the one that made the recording ("" when it is).

    The back-ends are replayed exactly, so a re-run by the same front-end at the recorded delay says what the
    recording says; another front-end (another kind, model or version) may say other words even at 0 s.
    """
    was, now = _front_end_of(recorded), _front_end_of(rerun)
    if was == now:
        return ""
    return (f"Not the recorded front-end: the recording was made by {_named(was)} and this re-run by "
            f"{_named(now)}, so its words can differ from the recording even at 0 s (the STT and oracle LLM are "
            "replayed exactly).")


def describe_outcome(o: DelayOutcome, reference_note: str) -> str:
    """Markdown: onset latency, the oracle at the start, the spoken answer and its score."""
    latency = "no response" if o.onset_latency_s is None else format_latency(o.onset_latency_s)
    if o.oracle is None:
        oracle = "none yet — it started on its own opener, before the first oracle arrived"
    else:
        hint = "" if o.oracle.hint_level is None else f", hint level {o.oracle.hint_level}"
        oracle = (f"revision {o.oracle.revision}{hint}: “{o.oracle.known_text or '(start token only)'}”"
                  + (f" (whole revision: “{o.oracle.full_text}”)" if o.oracle.full_text
                     and o.oracle.full_text != o.oracle.known_text else ""))
    score = ("no score (" + reference_note + ")" if o.score is None
             else f"**{o.score.score:.2f}** / 10 — {o.score.label}; against {reference_note}")
    return (f"**Forced delay {o.delay_s:.1f} s** → onset latency **{latency}**\n\n"
            f"- oracle when it started: {oracle}\n- spoken answer: “{o.answer or '(nothing)'}”\n"
            f"- score: {score}")


def curve_figure(outcomes: Sequence[DelayOutcome], reference_note: str, title: str = "") -> go.Figure:
    """Onset latency (x) against answer score (y), one point per delay, with the paper's quoted points."""
    pts = [o for o in sorted(outcomes, key=lambda o: o.delay_s) if o.onset_latency_s is not None and o.score]
    fig = go.Figure()
    label = pts[0].score.label if pts else "offline proxy score"  # type: ignore[union-attr]
    fig.add_trace(go.Scatter(
        x=[o.onset_latency_s for o in pts], y=[o.score.score for o in pts],  # type: ignore[union-attr]
        mode="lines+markers+text", text=[f"{o.delay_s:.1f} s" for o in pts], textposition="top center",
        marker=dict(size=10, color="#0072B2"), line=dict(color="#56B4E9"),
        customdata=[[o.delay_s, o.answer[:120]] for o in pts],
        hovertemplate="forced delay %{customdata[0]:.1f} s<br>onset %{x:+.2f} s<br>score %{y:.2f}"
                      "<br>“%{customdata[1]}”<extra>this input, re-run</extra>",
        name=f"this input, forced delay 0–3 s ({label})"))
    fig.add_trace(go.Scatter(
        x=[p[1] for p in PAPER_POINTS if p[1] is not None], y=[p[2] for p in PAPER_POINTS if p[1] is not None],
        mode="markers+text", text=[p[0] for p in PAPER_POINTS if p[1] is not None], textposition="bottom center",
        marker=dict(size=10, symbol="diamond-open", color="#8a94a0"),
        name="quoted from the paper (spoken MT-Bench judge — a different measure, not computed here)"))
    fig.update_layout(
        template="plotly_white", height=420, margin=dict(l=70, r=30, t=70, b=110),
        title=dict(text=f"<b>Latency–quality{': ' + title if title else ''}</b>",
                   subtitle=dict(text=f"score: {label} · references: {reference_note}")),
        xaxis=dict(title="response onset latency (s, negative = before the user finished)", zeroline=True),
        yaxis=dict(title="answer score (1–10)", range=[0.5, 10.5]),
        legend=dict(orientation="h", y=-0.25), meta={"kame_curve": {"delays": [o.delay_s for o in pts]}})
    return fig
