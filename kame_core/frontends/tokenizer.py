"""A word-level text tokenizer for the CPU stand-in, used when no sentencepiece model is around (datasets and the
test doubles number their words densely instead: :class:`~kame_core.augment.word_tokenizer.DenseWordTokenizer`).

The oracle manager tokenizes every streamed LLM chunk on its own, and chunks split text anywhere
(``"The capi"`` + ``"tal of France"``, or ``"is "`` + ``"Paris"``). So that the front-end can rebuild the
oracle text exactly by concatenating pieces, a token keeps the whitespace that precedes it in its chunk,
and whitespace at the end of a chunk becomes a token of its own: ``"".join(piece(i) for i in
encode(text))`` equals ``text`` with every run of whitespace written as one space.

Ids are stable: a piece's id is a hash of its text (the same word gets the same id in every session and
every instance), and each instance keeps its own table from ids back to pieces. Two pieces whose hashes
collide get neighbouring ids in the order they were first seen, the only order dependence (rare: about
one colliding pair in a vocabulary of 65,000 pieces).
"""
from __future__ import annotations

import hashlib
import re
import threading

_TOKEN_RE = re.compile(r"\s*\S+|\s+")
_FIRST_WORD_ID = 1000
_ID_SPACE = 2**31 - _FIRST_WORD_ID


class HashedWordTokenizer:
    """One token per word (with its leading space), plus a token for trailing whitespace.

    Reserved ids follow Moshi's text vocabulary where it has them: 0 end of text (unused here),
    1 oracle start (a reset of the oracle stream), 3 padding, 4 a lone space.
    """

    END_OF_TEXT_ID = 0
    START_ID = 1
    PADDING_ID = 3
    SPACE_ID = 4

    def __init__(self) -> None:
        self._pieces: dict[int, str] = {self.SPACE_ID: " "}
        self._ids: dict[str, int] = {" ": self.SPACE_ID}
        self._lock = threading.Lock()  # the oracle manager and the front-end may run in different threads

    @property
    def start_token_id(self) -> int:
        return self.START_ID

    @property
    def padding_token_id(self) -> int:
        return self.PADDING_ID

    def encode(self, text: str) -> list[int]:
        return [self._id(_normalize(token)) for token in _TOKEN_RE.findall(text)]

    def piece(self, token_id: int) -> str:
        with self._lock:
            return self._pieces.get(token_id, f"<{token_id}>")

    def _id(self, piece: str) -> int:
        with self._lock:
            known = self._ids.get(piece)
            if known is not None:
                return known
            digest = int.from_bytes(hashlib.blake2b(piece.encode("utf-8"), digest_size=8).digest(), "big")
            token_id = _FIRST_WORD_ID + digest % _ID_SPACE
            while token_id in self._pieces:  # hash collision: probe the next free id
                token_id = _FIRST_WORD_ID + (token_id - _FIRST_WORD_ID + 1) % _ID_SPACE
            self._ids[piece] = token_id
            self._pieces[token_id] = piece
            return token_id


def _normalize(token: str) -> str:
    """Any run of whitespace (newlines, tabs, several spaces) is written as one space."""
    word = token.lstrip()
    return (" " + word if len(word) < len(token) else word) if word else " "
