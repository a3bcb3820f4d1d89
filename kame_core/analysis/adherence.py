"""Oracle adherence: did the front-end speak the hint? One definition, used by every report.

For each oracle revision of a trace:

* **Its words** are the words of the pieces actually *fed* on the oracle stream (what reached the front-end),
  joined into whole words with :func:`~kame_core.analysis.trace_query.join_words` (" Can", "berra", "." is one word,
  "Canberra."). The revision's whole text (everything the LLM streamed for it) is kept beside them as ``text``
  but is not scored. A word's *fed frame* is the frame of its first piece.
* **Eligible spoken words** are the front-end's inner-monologue words (text pieces of every frame, joined the same
  way; a word is placed at the frame of its first piece) said in the revision's *window*: from its first fed
  frame (the frame of its start token, else of its first piece) up to, not including, the first fed frame of
  the next revision to reach the front-end (or the end of the run). Words said before the window count for
  an earlier revision (or none), never for this one.
* **Alignment**: the revision's words and the eligible spoken words are compared after normalising (lower case,
  punctuation stripped; a word that normalises to nothing, a lone dash or comma, is dropped from both sides)
  with :class:`difflib.SequenceMatcher` (``autojunk`` off), in order. A revision word paired with an equal
  spoken word is **spoken**, at that spoken word's frame, but only if it was said at or after the frame it was
  fed (a front-end step reads the oracle token of its own frame, so the same frame counts, lag 0): a spoken word
  said before the revision word was fed is not the hint being followed, so that spoken word is taken out of the
  alignment (it matches nothing in this revision, and is not "said instead" either) and the alignment redone,
  until every pair respects the order.
* **Lag** of a spoken word = (frame spoken − frame fed) × :data:`~kame_core.clock.FRAME_SECONDS` (≥ 0); a word
  fed but never spoken has no lag.
* **Said instead**: the spoken words of each stretch the alignment pairs with unspoken revision words (a
  ``replace``: "The capital is Sydney" against "The capital is Canberra." says "Sydney" instead), in order.
  Spoken words inserted between matched ones ("no, wait,") are not "instead" of anything.
* **Spoken share** = spoken words ÷ fed words; a revision with no fed words (superseded before its tokens
  reached the front-end, or fed only its start token) has None and is left out of the session's share.

Self-corrections: a word the front-end spoke and then abandoned in a self-correction ("Humans bring — no, wait,
Humans breathe out ...") was spoken all the same; it counts as spoken for the revision whose window it fell in.

Per session: the spoken share over all fed words of all revisions, and the median and 90th percentile (linear
interpolation) of the lags of all spoken words. A run without oracle (Moshi mode, the cascade) gives no
revisions and None for all three.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from ..clock import FRAME_SECONDS
from ..record.trace import SessionTrace
from .trace_query import FramedWord, framed_words, front_end_words, oracle_revisions

_PUNCTUATION = re.compile(r"[^\w\s]|_")


def normalise(word: str) -> str:
    """A word as the alignment compares it: lower case, punctuation (and spaces) stripped."""
    return "".join(_PUNCTUATION.sub("", word.lower()).split())


@dataclass(frozen=True)
class WordAdherence:
    """One fed word of a revision: when it was fed and, if the front-end then said it, when."""

    word: str
    fed_frame: int
    spoken_frame: int | None = None

    @property
    def spoken(self) -> bool:
        return self.spoken_frame is not None

    @property
    def fed_t(self) -> float:
        return self.fed_frame * FRAME_SECONDS

    @property
    def spoken_t(self) -> float | None:
        return None if self.spoken_frame is None else self.spoken_frame * FRAME_SECONDS

    @property
    def lag_s(self) -> float | None:
        """Seconds from the frame the word was fed to the frame it was spoken (None: never spoken)."""
        return None if self.spoken_frame is None else (self.spoken_frame - self.fed_frame) * FRAME_SECONDS

    def to_json(self) -> dict[str, Any]:
        return {"word": self.word, "fed_frame": self.fed_frame, "fed_t": _round(self.fed_t),
                "spoken_frame": self.spoken_frame, "spoken_t": _round(self.spoken_t), "lag_s": _round(self.lag_s)}


@dataclass(frozen=True)
class RevisionAdherence:
    """How much of one oracle revision the front-end spoke (see the module docstring)."""

    revision: int
    hint_level: int | None
    #: everything the LLM streamed for it (fed or not)
    text: str
    #: its window: first fed frame (None: never fed) and the first frame after it (the next revision's first)
    start_frame: int | None
    end_frame: int | None
    words: tuple[WordAdherence, ...]
    said_instead: tuple[str, ...]
    spoken_share: float | None

    @property
    def n_fed(self) -> int:
        return len(self.words)

    @property
    def n_spoken(self) -> int:
        return sum(w.spoken for w in self.words)

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "hint_level": self.hint_level, "text": self.text,
                "start_frame": self.start_frame, "end_frame": self.end_frame, "n_fed": self.n_fed,
                "n_spoken": self.n_spoken, "spoken_share": _round(self.spoken_share),
                "said_instead": list(self.said_instead), "words": [w.to_json() for w in self.words]}


@dataclass(frozen=True)
class SessionAdherence:
    """Oracle adherence of a whole run: per revision, and over all fed words."""

    revisions: tuple[RevisionAdherence, ...]
    spoken_share: float | None
    median_lag_s: float | None
    p90_lag_s: float | None

    @property
    def n_fed(self) -> int:
        return sum(r.n_fed for r in self.revisions)

    @property
    def n_spoken(self) -> int:
        return sum(r.n_spoken for r in self.revisions)

    def to_json(self) -> dict[str, Any]:
        return {"spoken_share": _round(self.spoken_share), "median_lag_s": _round(self.median_lag_s),
                "p90_lag_s": _round(self.p90_lag_s), "n_fed": self.n_fed, "n_spoken": self.n_spoken,
                "revisions": [r.to_json() for r in self.revisions]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True)
class _Keyed:
    """A whole word as the alignment compares it (its normalised key), as written, at the frame of its first
    piece."""

    key: str
    text: str
    frame: int


def _keyed(words: Sequence[FramedWord]) -> list[_Keyed]:
    """Words (:func:`~kame_core.analysis.trace_query.framed_words`) that normalise to something (not a lone dash or
    comma), keyed for the alignment."""
    return [_Keyed(normalise(w.text), w.text, w.first_frame) for w in words if normalise(w.text)]


def _align(fed: Sequence[_Keyed],
           said: Sequence[_Keyed]) -> tuple[Sequence[tuple[str, int, int, int, int]], set[int]]:
    """SequenceMatcher opcodes of fed against said words where every pair is said at or after it was fed, and
    the said words taken out: a spoken word paired with a word fed later is masked (made unequal to every word)
    and the alignment redone."""
    keys: list[str | tuple[int]] = [w.key for w in said]
    masked: set[int] = set()
    while True:
        matcher = SequenceMatcher(None, [w.key for w in fed], keys, autojunk=False)
        early = [j + k for i, j, n in matcher.get_matching_blocks() for k in range(n)
                 if said[j + k].frame < fed[i + k].frame]
        if not early:
            return matcher.get_opcodes(), masked
        for j in early:
            keys[j] = (j,)  # equal to no word
        masked.update(early)


def _revision(revision: int, hint_level: int | None, text: str, fed: list[_Keyed], start: int | None,
              end: int | None, spoken: list[_Keyed]) -> RevisionAdherence:
    said = [w for w in spoken if start is not None and start <= w.frame and (end is None or w.frame < end)]
    frames: dict[int, int] = {}
    instead: list[str] = []
    opcodes, early = _align(fed, said) if fed else ([], set())
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            frames.update({i1 + k: said[j1 + k].frame for k in range(i2 - i1)})
        elif tag == "replace":
            instead.extend(said[j].text for j in range(j1, j2) if j not in early)
    words = tuple(WordAdherence(w.text, w.frame, frames.get(i)) for i, w in enumerate(fed))
    share = sum(w.spoken for w in words) / len(words) if words else None
    return RevisionAdherence(revision=revision, hint_level=hint_level, text=text, start_frame=start,
                             end_frame=end if start is not None else None, words=words,
                             said_instead=tuple(instead), spoken_share=share)


def oracle_adherence(trace: SessionTrace) -> SessionAdherence:
    """Oracle adherence of a run (see the module docstring), revisions in reset order (revisions fed without a
    reset event, as in some hand-made traces, after them by number)."""
    first: dict[int, int] = {}
    pieces: dict[int, list[tuple[int, str]]] = {}
    for i, f in enumerate(trace.frames):
        rev = f.oracle.revision
        if rev is None:
            continue
        if f.oracle.is_start or not f.oracle.is_padding:
            first.setdefault(rev, i)
        if not f.oracle.is_start and not f.oracle.is_padding:
            pieces.setdefault(rev, []).append((i, f.oracle.piece))
    spoken = _keyed(front_end_words(trace))
    starts = sorted(set(first.values()))

    def end_of(rev: int) -> int | None:
        later = [s for s in starts if s > first[rev]] if rev in first else []
        return later[0] if later else None

    listed: dict[int, tuple[int | None, str]] = {}
    for r in oracle_revisions(trace):
        listed.setdefault(r.revision, (r.hint_level, r.text))
    for rev in sorted(first):
        listed.setdefault(rev, (None, " ".join("".join(p for _, p in pieces.get(rev, [])).split())))
    revisions = tuple(_revision(rev, level, text, _keyed(framed_words(pieces.get(rev, []))), first.get(rev),
                                end_of(rev), spoken)
                      for rev, (level, text) in listed.items())
    fed = sum(r.n_fed for r in revisions)
    lags = [w.lag_s for r in revisions for w in r.words if w.lag_s is not None]
    return SessionAdherence(
        revisions=revisions, spoken_share=sum(r.n_spoken for r in revisions) / fed if fed else None,
        median_lag_s=float(np.median(lags)) if lags else None,
        p90_lag_s=float(np.percentile(lags, 90)) if lags else None)
