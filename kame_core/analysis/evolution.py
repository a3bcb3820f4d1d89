"""The oracle's evolution: each revision's spoken ratio / hint level against how close its text is to the
final oracle of its turn (and to a reference answer), when it reached the front-end, whether the front-end
switched to it -- the "vague to sharp" curve of the KAME paper, as data.

Closeness is a word-level similarity: difflib's ratio over the normalized word sequences (2 x matching words
/ total words, in [0, 1]); no model is needed, so it is computed the same everywhere. The final oracle of a
turn is the text of the last revision asked during it (requests are assigned to the user turn begun by their
start; a trace without voice-activity events is one turn).
"""
from __future__ import annotations

import difflib
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..clock import FRAME_SECONDS
from ..record.trace import SessionTrace
from .hint_levels import MAX_HINT_LEVEL
from .trace_query import llm_requests, oracle_revisions, self_corrections, user_turns


def words(text: str) -> list[str]:
    """Lower-case words without punctuation."""
    return [w for w in (re.sub(r"[^\w']", "", part.lower()) for part in text.split()) if w]


def similarity(a: str, b: str) -> float:
    """Word-level similarity in [0, 1] (difflib ratio over normalized words; 1.0 for two empty texts)."""
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio()


@dataclass(frozen=True)
class EvolutionPoint:
    """One revision on the evolution curve."""

    run: str
    revision: int
    turn: int
    text: str
    spoken_ratio: float | None
    hint_level: int | None
    #: similarity of its text to the final oracle of its turn (1.0 for the final one itself)
    to_final: float
    #: similarity to the turn's reference answer (None without one)
    to_reference: float | None
    #: session time its start token reached the front-end (None: superseded before it did)
    reached_t: float | None
    #: the front-end took back words to switch to it (a self-correction names it)
    switched: bool
    is_final: bool
    #: the front-end said words while this was the newest revision it had heard (it spoke from it)
    spoke: bool = False


def evolution_points(trace: SessionTrace, references: Sequence[str] = (), run: str = "") -> list[EvolutionPoint]:
    """Every revision of one run with an oracle text, in reset order (see the module docstring)."""
    turns = user_turns(trace)
    starts = {r.request: r.start_t for r in llm_requests(trace)}
    switched_to = {c.revision for _, c in self_corrections(trace) if c.revision is not None}
    every = oracle_revisions(trace)
    revisions = [r for r in every if r.text.strip()]
    heard_from = sorted(r.start_frame for r in every if r.start_frame is not None)
    has_text = [not f.text_is_padding for f in trace.frames]

    def spoke_from(start: int | None) -> bool:
        if start is None:
            return False
        later = [f for f in heard_from if f > start]
        return any(has_text[start:later[0] if later else len(has_text)])

    def turn_of(t: float) -> int:
        return max(0, sum(turn.start <= t for turn in turns) - 1) if turns else 0

    turn_index = [turn_of(starts.get(r.request, r.reset_t) if r.request is not None else r.reset_t) for r in revisions]
    finals = {k: r for k, r in zip(turn_index, revisions)}  # the last one per turn wins
    out = []
    for k, r in zip(turn_index, revisions):
        final = finals[k]
        reference = references[k] if k < len(references) and references[k].strip() else None
        out.append(EvolutionPoint(
            run=run, revision=r.revision, turn=k, text=r.text, spoken_ratio=r.spoken_ratio, hint_level=r.hint_level,
            to_final=similarity(r.text, final.text),
            to_reference=None if reference is None else similarity(r.text, reference),
            reached_t=None if r.start_frame is None else r.start_frame * FRAME_SECONDS,
            switched=r.revision in switched_to, is_final=r is final, spoke=spoke_from(r.start_frame)))
    return out


@dataclass(frozen=True)
class LevelRow:
    """The points of one hint level, summarized."""

    level: int
    n: int
    mean_ratio: float | None
    mean_to_final: float | None
    mean_to_reference: float | None
    n_reference: int
    reached: int
    switched: int
    spoke: int = 0


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def per_level(points: Iterable[EvolutionPoint]) -> list[LevelRow]:
    """One row per hint level 0..5 (levels without points have n = 0)."""
    points = list(points)
    rows = []
    for level in range(MAX_HINT_LEVEL + 1):
        mine = [p for p in points if p.hint_level == level]
        refs = [p.to_reference for p in mine if p.to_reference is not None]
        rows.append(LevelRow(level=level, n=len(mine), mean_ratio=_mean(p.spoken_ratio for p in mine
                                                                         if p.spoken_ratio is not None),
                             mean_to_final=_mean(p.to_final for p in mine), mean_to_reference=_mean(refs),
                             n_reference=len(refs), reached=sum(p.reached_t is not None for p in mine),
                             switched=sum(p.switched for p in mine), spoke=sum(p.spoke for p in mine)))
    return rows


def level_table_markdown(points: Iterable[EvolutionPoint]) -> str:
    """The per-level numbers as a Markdown table."""
    def f(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"
    lines = ["| hint level | revisions | mean spoken ratio | similarity to final oracle | similarity to reference "
             "(n) | reached the front-end (start token fed) | front-end spoke from it | self-corrected to it |",
             "|---|---|---|---|---|---|---|---|"]
    for row in per_level(points):
        lines.append(f"| {row.level} | {row.n} | {f(row.mean_ratio)} | {f(row.mean_to_final)} | "
                     f"{f(row.mean_to_reference)} ({row.n_reference}) | {row.reached} | {row.spoke} | "
                     f"{row.switched} |")
    return "\n".join(lines)
