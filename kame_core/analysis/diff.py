"""Word-level diffs of what runs said, aligned on time.

* **Spoken words** of a run: the front-end's inner-monologue words (for a cascade run, the words its TTS speaks),
  read exactly as oracle adherence reads them (:func:`kame_core.analysis.trace_query.front_end_words`): sub-word pieces
  joined into whole words, each at the frame of its first piece, words that normalise to nothing left out.
* **Word diff**: two word sequences aligned with :class:`difflib.SequenceMatcher` (``autojunk`` off) on
  normalised words (:func:`kame_core.analysis.adherence.normalise`: case and punctuation ignored). Each stretch is
  ``equal``, ``replace``, ``delete`` (words only in a) or ``insert`` (words only in b), with each side's words and
  times, so a UI can lay both runs on one time axis.
* **Revision diffs**: the text of each oracle revision against the next one's (by reset time); the words have no
  times, the change is at the next revision's reset time.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal, cast

from ..clock import FRAME_SECONDS
from ..record.trace import SessionTrace
from .adherence import normalise
from .trace_query import OracleRevision, front_end_words, oracle_revisions

Op = Literal["equal", "replace", "delete", "insert"]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True)
class TimedWord:
    """A whole word as written, at the frame of its first piece (None for a word read from text, with no time)."""

    word: str
    frame: int | None = None
    t: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"word": self.word, "frame": self.frame, "t": _round(self.t)}


@dataclass(frozen=True)
class DiffOp:
    """One stretch of the alignment: the words of a and of b in it (either may be empty)."""

    op: Op
    a: tuple[TimedWord, ...]
    b: tuple[TimedWord, ...]

    @property
    def a_words(self) -> tuple[str, ...]:
        return tuple(w.word for w in self.a)

    @property
    def b_words(self) -> tuple[str, ...]:
        return tuple(w.word for w in self.b)

    @property
    def a_start_t(self) -> float | None:
        """Time of a's first word in the stretch (None: no a-words, or no times)."""
        return self.a[0].t if self.a else None

    @property
    def a_end_t(self) -> float | None:
        """Time of a's last word in the stretch (its first piece)."""
        return self.a[-1].t if self.a else None

    @property
    def b_start_t(self) -> float | None:
        return self.b[0].t if self.b else None

    @property
    def b_end_t(self) -> float | None:
        return self.b[-1].t if self.b else None

    @property
    def t(self) -> float | None:
        """Where the stretch starts on the shared time axis: the earlier of the two sides' first times."""
        times = [t for t in (self.a_start_t, self.b_start_t) if t is not None]
        return min(times) if times else None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "a": [w.to_json() for w in self.a], "b": [w.to_json() for w in self.b],
                "a_start_t": _round(self.a_start_t), "a_end_t": _round(self.a_end_t),
                "b_start_t": _round(self.b_start_t), "b_end_t": _round(self.b_end_t)}


@dataclass(frozen=True)
class DiffSummary:
    """Word counts of a diff: ``equal + only_a + replaced_a`` is a's words, ``equal + only_b + replaced_b`` b's."""

    equal: int
    only_a: int
    only_b: int
    replaced_a: int
    replaced_b: int
    #: share of a's words b also said (equal ÷ a's words; None when a said nothing)
    share_of_a_in_b: float | None

    def to_json(self) -> dict[str, Any]:
        return {"equal": self.equal, "only_a": self.only_a, "only_b": self.only_b, "replaced_a": self.replaced_a,
                "replaced_b": self.replaced_b, "share_of_a_in_b": _round(self.share_of_a_in_b)}


@dataclass(frozen=True)
class RevisionDiff:
    """The words of one oracle revision's text against the next one's, changed at ``t`` (the next one's reset)."""

    from_revision: int
    to_revision: int
    t: float
    ops: tuple[DiffOp, ...]

    def to_json(self) -> dict[str, Any]:
        return {"from_revision": self.from_revision, "to_revision": self.to_revision, "t": _round(self.t),
                "ops": [op.to_json() for op in self.ops]}


def spoken_words(trace: SessionTrace) -> tuple[TimedWord, ...]:
    """The words a run said, each at the frame (and time) of its first piece (as oracle adherence reads them)."""
    return tuple(TimedWord(w.text, w.first_frame, w.first_frame * FRAME_SECONDS) for w in front_end_words(trace)
                 if normalise(w.text))


def word_diff(a: Sequence[TimedWord], b: Sequence[TimedWord]) -> tuple[DiffOp, ...]:
    """a's words aligned with b's on normalised words (case and punctuation ignored; a word that normalises to
    nothing is left out of both sides), in order; empty when both are empty."""
    a = [w for w in a if normalise(w.word)]
    b = [w for w in b if normalise(w.word)]
    matcher = SequenceMatcher(None, [normalise(w.word) for w in a], [normalise(w.word) for w in b], autojunk=False)
    ops: list[DiffOp] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        ops.append(DiffOp(cast(Op, tag), tuple(a[i1:i2]), tuple(b[j1:j2])))
    return tuple(ops)


def diff_runs(a_trace: SessionTrace, b_trace: SessionTrace) -> tuple[DiffOp, ...]:
    """The word diff of what run a said against what run b said."""
    return word_diff(spoken_words(a_trace), spoken_words(b_trace))


def summary(ops: Sequence[DiffOp]) -> DiffSummary:
    """Word counts of a diff, and the share of a's words b also said."""
    count = {tag: (sum(len(o.a) for o in ops if o.op == tag), sum(len(o.b) for o in ops if o.op == tag))
             for tag in ("equal", "replace", "delete", "insert")}
    equal = count["equal"][0]
    n_a = equal + count["replace"][0] + count["delete"][0]
    return DiffSummary(equal=equal, only_a=count["delete"][0], only_b=count["insert"][1],
                       replaced_a=count["replace"][0], replaced_b=count["replace"][1],
                       share_of_a_in_b=equal / n_a if n_a else None)


def _text_words(text: str) -> tuple[TimedWord, ...]:
    return tuple(TimedWord(word) for word in text.split())


def revision_diffs(trace: SessionTrace) -> tuple[RevisionDiff, ...]:
    """For each pair of consecutive oracle revisions (by reset time; a revision reset twice counts at its first
    reset), the word diff of the earlier one's text against the later one's."""
    revisions: dict[int, OracleRevision] = {}
    for r in sorted(oracle_revisions(trace), key=lambda r: r.reset_t):
        revisions.setdefault(r.revision, r)
    ordered = list(revisions.values())
    return tuple(RevisionDiff(prev.revision, nxt.revision, nxt.reset_t,
                              word_diff(_text_words(prev.text), _text_words(nxt.text)))
                 for prev, nxt in zip(ordered, ordered[1:]))


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|~"})


def _quoted(words: Sequence[str]) -> str:
    return f"“{' '.join(words).translate(_MARKDOWN)}”" if words else "—"


def diff_markdown(ops: Sequence[DiffOp], a_name: str, b_name: str) -> str:
    """A short markdown list: one line per non-equal stretch ("2.40 s — KAME: “Sydney” · Moshi mode:
    “Canberra.”", without the time when the words have none), equal stretches summarised as a word count."""
    lines = []
    for o in ops:
        if o.op == "equal":
            n = len(o.a)
            lines.append(f"- _{n} word{'' if n == 1 else 's'} the same_")
            continue
        when = "" if o.t is None else f"{o.t:.2f} s — "
        lines.append(f"- {when}{a_name}: {_quoted(o.a_words)} · {b_name}: {_quoted(o.b_words)}")
    return "\n".join(lines) if lines else "_No words in either run._"
