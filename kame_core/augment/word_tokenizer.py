"""A word-level :class:`~kame_core.protocols.TextTokenizer` that needs no model files.

Each whitespace-separated word is one token; ids are dense, given out in order of first appearance, per instance
(so two instances never share state), after padding 0 and the oracle start 1. Good enough to lay oracle and text
streams onto frames offline (datasets, imported logs, the test doubles); the neural front-end uses its
sentencepiece tokenizer instead, the CPU stand-in the
:class:`~kame_core.frontends.tokenizer.HashedWordTokenizer` (ids stable across instances, Moshi's reserved ids,
whitespace kept).
"""
from __future__ import annotations


class DenseWordTokenizer:
    """Whitespace words -> ids; ``0`` is padding, ``1`` the oracle start token, words from ``2`` on."""

    PADDING_ID = 0
    START_ID = 1

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = ["", ""]  # pieces of the padding and start ids

    @property
    def start_token_id(self) -> int:
        return self.START_ID

    @property
    def padding_token_id(self) -> int:
        return self.PADDING_ID

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split():
            if word not in self._ids:
                self._ids[word] = len(self._words)
                self._words.append(word)
            ids.append(self._ids[word])
        return ids

    def piece(self, token_id: int) -> str:
        """The word with a leading space (like a sentencepiece word start); ``""`` for padding and start."""
        if token_id < 0 or token_id >= len(self._words):
            raise KeyError(f"unknown token id {token_id}")
        word = self._words[token_id]
        return f" {word}" if word else ""

    @property
    def vocabulary(self) -> list[str]:
        """Words by id (``""`` for padding and start)."""
        return list(self._words)
