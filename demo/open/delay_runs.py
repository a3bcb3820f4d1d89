"""Forced-delay re-runs of a recorded KAME run (their curve: :mod:`demo.figures.delay_curve`).

A re-run replays the recording's back-ends (:mod:`kame_core.pipelines.replay`: STT events and oracle LLM
chunks at their recorded times, which do not depend on the delay) and re-runs only the front-end, held
silent until ``delay`` after the user's speech, on the virtual clock. For each delay it reports the onset
latency, the oracle the front-end had when it started speaking, what it said, and a score of that answer
(:func:`demo.app.scoring.score_answer`; the offline proxy unless a judge is wired in and keyed).
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from kame_core.analysis.metrics import turn_onsets, user_turns
from kame_core.analysis.trace_query import llm_requests, revision_at
from kame_core.clock import FRAME_SECONDS
from kame_core.pipelines.replay import rerun_front_end
from kame_core.protocols import FrontEnd
from kame_core.record.trace import SessionTrace

from ..app.scoring import AnswerJudge, AnswerScore, score_answer
from ..figures.latency_lanes import format_latency

#: the delays of the latency–quality curve (seconds)
DELAYS_S: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
MAX_DELAY_S = 3.0


@dataclass(frozen=True)
class OracleAtStart:
    """The oracle revision the front-end had been fed when it started to speak, and how much of it."""

    revision: int
    hint_level: Any
    known_text: str     # the oracle pieces fed up to the onset frame
    full_text: str      # the whole revision as the back-end wrote it


@dataclass(frozen=True)
class TurnOutcome:
    """One user turn of a forced-delay run: its onset latency, the oracle when the answer began, what was said in
    reply (up to the next user turn) and its score (None when no reference)."""

    turn: int                       # 0 = the first user turn
    onset_latency_s: float | None
    oracle: OracleAtStart | None
    answer: str
    score: AnswerScore | None


@dataclass(frozen=True)
class DelayOutcome:
    """One forced-delay run of one input: ``trace`` is the re-run, ``turns`` each user turn's outcome (the first
    turn's are also its ``onset_latency_s``, ``oracle``, ``answer`` and ``score``)."""

    delay_s: float
    trace: SessionTrace
    turns: tuple[TurnOutcome, ...]

    @property
    def first(self) -> TurnOutcome:
        return self.turns[0] if self.turns else TurnOutcome(0, None, None, self.trace.spoken_text(), None)

    @property
    def onset_latency_s(self) -> float | None:
        return self.first.onset_latency_s

    @property
    def oracle(self) -> OracleAtStart | None:
        return self.first.oracle

    @property
    def answer(self) -> str:
        return self.first.answer

    @property
    def score(self) -> AnswerScore | None:
        return self.first.score


def answer_to(trace: SessionTrace, turn: int = 0) -> str:
    """What the assistant said in reply to user turn ``turn`` (from its start up to the next user turn); the
    whole run's words when it has no user turn."""
    turns = user_turns(trace)
    if not turns:
        return trace.spoken_text()
    if turn >= len(turns):
        return ""
    end = int(round(turns[turn + 1].start / FRAME_SECONDS)) if turn + 1 < len(turns) else None
    return trace.spoken_text(int(round(turns[turn].start / FRAME_SECONDS)), end)


def oracle_at(trace: SessionTrace, onset_s: float | None) -> OracleAtStart | None:
    """The oracle the front-end had been fed at ``onset_s`` (None: none yet, or no onset)."""
    if onset_s is None:
        return None
    at = revision_at(trace, int(round(onset_s / FRAME_SECONDS)))
    if at is None:
        return None
    return OracleAtStart(revision=at.revision.revision, hint_level=at.revision.hint_level, known_text=at.fed_text,
                         full_text=at.revision.text)


def turn_references(references: Sequence[str], n_turns: int) -> list[list[str]]:
    """The references each of ``n_turns`` user turns is scored against: one each when there is one per turn (a
    multi-turn scenario's), else all of them for every turn."""
    refs = list(references)
    if n_turns > 1 and len(refs) == n_turns:
        return [[r] for r in refs]
    return [refs] * n_turns


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
              cache_key: Any = None, judge: AnswerJudge | None = None) -> DelayOutcome:
    """Re-run ``kame`` with a forced delay of ``delay_s`` (0–3 s); cached under ``(cache_key, ms)``."""
    if not 0.0 <= delay_s <= MAX_DELAY_S:
        raise ValueError(f"forced delay {delay_s} s: choose between 0 and {MAX_DELAY_S:g} s")
    ms = int(round(delay_s * 1000))
    key = (cache_key, ms)
    if cache is not None and key in cache:
        return cache[key]
    trace = rerun_front_end(kame, make_front_end, forced_delay_ms=ms)
    onsets = {o.turn: o for o in turn_onsets(trace)}
    n_turns = max(1, len(user_turns(trace)))
    turns = []
    for k, refs in enumerate(turn_references(references, n_turns)):
        onset = onsets.get(k)
        answer = answer_to(trace, k)
        turns.append(TurnOutcome(turn=k, onset_latency_s=None if onset is None else onset.latency_s,
                                 oracle=None if onset is None else oracle_at(trace, onset.text_onset),
                                 answer=answer, score=score_answer(answer, refs, judge) if refs else None))
    outcome = DelayOutcome(delay_s=ms / 1000, trace=trace, turns=tuple(turns))
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
    """Markdown: per user turn, onset latency, the oracle at the start, the spoken answer and its score (one turn:
    as one paragraph; several: one heading each)."""
    parts = [_describe_turn(t, reference_note) for t in o.turns] or [_describe_turn(o.first, reference_note)]
    if len(parts) == 1:
        return f"**Forced delay {o.delay_s:.1f} s** → {parts[0]}"
    return f"**Forced delay {o.delay_s:.1f} s**, {len(parts)} user turns\n\n" + "\n\n".join(
        f"**Turn {t.turn + 1}** → {part}" for t, part in zip(o.turns, parts))


def _describe_turn(t: TurnOutcome, reference_note: str) -> str:
    latency = "no response" if t.onset_latency_s is None else format_latency(t.onset_latency_s)
    if t.oracle is None:
        oracle = "none yet — it started on its own opener, before the first oracle arrived"
    else:
        hint = "" if t.oracle.hint_level is None else f", hint level {t.oracle.hint_level}"
        oracle = (f"revision {t.oracle.revision}{hint}: “{t.oracle.known_text or '(start token only)'}”"
                  + (f" (whole revision: “{t.oracle.full_text}”)" if t.oracle.full_text
                     and t.oracle.full_text != t.oracle.known_text else ""))
    score = ("no score (" + reference_note + ")" if t.score is None
             else f"**{t.score.score:.2f}** / 10 — {t.score.label}; against {reference_note}")
    return (f"onset latency **{latency}**\n\n"
            f"- oracle when it started: {oracle}\n- spoken answer: “{t.answer or '(nothing)'}”\n"
            f"- score: {score}")
