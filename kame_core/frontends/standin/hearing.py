"""What the stand-in hears: the oracle stream token by token (the user is followed by a
:class:`~kame_core.turns.tracker.UserTurnTracker` from the STT events, and by the floor listener from the
user's audio, :mod:`kame_core.turns.listener`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


def normalize(word: str) -> str:
    """A word as compared between oracle revisions: lower case, no punctuation."""
    return re.sub(r"[^\w']", "", word.lower()).strip("'")


@dataclass
class OracleView:
    """The newest oracle as heard on the oracle stream, token by token."""

    revision: int = 0  # start tokens heard this session
    pieces: list[str] = field(default_factory=list)
    started_frame: int = -1  # frame of this revision's start token
    quiet_frames: int = 0  # frames since the last oracle token

    def text(self) -> str:
        return "".join(self.pieces)

    def words(self, settled: bool) -> list[str]:
        """The complete words so far: the last one only once whitespace followed it or the stream settled."""
        text = self.text()
        words = text.split()
        if words and not settled and not text[-1].isspace():
            words.pop()
        return [w for w in words if normalize(w)]
