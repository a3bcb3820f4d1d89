"""Hint levels: how much of the user's current utterance was heard when an oracle was asked for.

The KAME training data labels every oracle with a *hint level* 0..5 from the *spoken ratio* r of the
request behind it (the table in ``ORACLE_RULES.md`` beside the shared SpokenWOZ sample):
r <= 0.5 -> 0, <= 0.65 -> 1, <= 0.8 -> 2, <= 0.95 -> 3, <= 0.99 -> 4, else 5.

For a run of this studio the spoken ratio of a request is

    words of the user's current utterance in the transcript the request was made from
    ----------------------------------------------------------------------------------
    words of that utterance in its final transcript

where an *utterance* is the user's turn (the finals of one turn, :mod:`kame_core.turns.tracker`; a final
alone when the trace has no voice-activity events). It is known once the utterance's final transcript is.
This module holds the arithmetic on word counts; :mod:`kame_core.analysis.trace_query` reads the counts from a trace.
"""
from __future__ import annotations

from collections.abc import Sequence

#: Upper bounds (inclusive) of the spoken ratio for hint levels 0..4; above the last one is level 5.
HINT_LEVEL_BOUNDS = (0.5, 0.65, 0.8, 0.95, 0.99)
MAX_HINT_LEVEL = len(HINT_LEVEL_BOUNDS)


def hint_level(ratio: float) -> int:
    """Hint level 0..5 for a spoken ratio (table in ORACLE_RULES.md; each bound belongs to the lower level)."""
    if ratio != ratio:  # NaN
        raise ValueError("spoken ratio is NaN")
    for level, bound in enumerate(HINT_LEVEL_BOUNDS):
        if ratio <= bound:
            return level
    return MAX_HINT_LEVEL


def spoken_ratio(request_words: int, committed_words: int, utterance_ends: Sequence[int]) -> float | None:
    """The spoken ratio of one request, from word counts of the user's side of the conversation.

    ``request_words``: user words in the transcript the request was made from (finals so far plus the pending
    partial); ``committed_words``: user words of the finals received before the request; ``utterance_ends``:
    for each utterance in order, the cumulative user words once its final transcript is complete (strictly
    increasing). The current utterance is the one the pending words belong to (the first not yet complete),
    or, with no pending words, the one the committed words end in. Returns a ratio clipped to [0, 1] (a
    partial can hold more words than the final), or None when that utterance never got its final.
    """
    if request_words < 0 or committed_words < 0:
        raise ValueError("word counts cannot be negative")
    if any(b <= a for a, b in zip([0, *utterance_ends], utterance_ends)):
        raise ValueError("utterance ends must be strictly increasing (and positive)")
    pending = request_words > committed_words
    previous = 0
    for end in utterance_ends:
        if (end > committed_words) if pending else (end >= request_words):
            return min(1.0, max(0.0, (request_words - previous) / (end - previous)))
        previous = end
    return None
