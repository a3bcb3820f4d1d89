"""What the stand-in says: the answer being spoken, and how a newer answer changes it.

:func:`decide` is the whole rule, a pure function of the answer so far (its words and the words of it already
said) and the newer answer: it is what a test can check with strings alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .hearing import normalize

Source = Literal["oracle", "guess", "moshi"]


@dataclass
class SpokenAnswer:
    """The answer being spoken: its words, where they came from, and the words of it said so far.

    Invariant: ``said`` matches ``words[:len(said)]`` word for word (compared by :func:`normalize`);
    ``said_frames[k]`` is the frame where ``said[k]`` was spoken.
    """

    words: list[str]
    source: Source
    revision: int | None
    turn: int
    said: list[str] = field(default_factory=list)
    said_frames: list[int] = field(default_factory=list)
    last_word_frame: int | None = None
    opened: bool = False  # an opener was said for it (oracle-timed openers)
    #: frame of the start token of the oracle revision it follows (None for a model answer)
    oracle_frame: int | None = None


@dataclass(frozen=True)
class Decision:
    """How a newer answer changes the one being spoken.

    ``words`` is the answer from now on and ``said`` what of it counts as said. ``switch_at`` is None when it
    carries on (nothing said is contradicted), else the index of the first word already said that the newer
    answer contradicts: the words said from there on are taken back and speech resumes at ``words[switch_at]``.
    """

    words: list[str]
    said: list[str]
    switch_at: int | None

    @property
    def switches(self) -> bool:
        return self.switch_at is not None


def first_contradiction(said: Sequence[str], new: Sequence[str]) -> int | None:
    """Index of the first word already said that ``new`` contradicts (None: it agrees with all it covers)."""
    for j, (a, b) in enumerate(zip(said, new)):
        if normalize(a) != normalize(b):
            return j
    return None


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading words ``a`` and ``b`` share (compared by :func:`normalize`)."""
    n = 0
    for x, y in zip(a, b):
        if normalize(x) != normalize(y):
            break
        n += 1
    return n


def sentence_start(words: Sequence[str], k: int) -> int:
    """Index of the first word of the sentence that holds ``words[k]`` (0 when no sentence ended before it)."""
    for i in range(min(k, len(words)), 0, -1):
        if words[i - 1].rstrip("\"')»”").endswith((".", "!", "?")):
            return i
    return 0


def decide(words: Sequence[str], said: Sequence[str], new: Sequence[str]) -> Decision:
    """Take in a newer (possibly still partial) answer ``new`` for an answer ``words`` of which ``said`` was said.

    If ``new`` contradicts a word already said, switch: the caller takes back the words said from the start of
    the sentence that holds the first contradicted word, says a repair and restarts that sentence cleanly from
    ``new`` ("The toys are — no, wait, the tallest mountain is …", not "… no, wait, tallest mountain").
    Otherwise carry on: the unsaid rest becomes ``new``'s, except where ``new`` is
    only a shorter prefix of the old answer, whose longer tail stays (the oracle may have been cut by a
    restart; nothing contradicts the tail).
    """
    k = first_contradiction(said, new)
    if k is None:
        keep = list(words) if common_prefix(words, new) >= len(new) else list(new)
        return Decision(words=keep, said=list(said), switch_at=None)
    start = sentence_start(new, k)
    return Decision(words=list(new), said=list(new[:start]), switch_at=start)
