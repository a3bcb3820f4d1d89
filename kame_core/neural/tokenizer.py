"""The front-end's sentencepiece text tokenizer, behind the core ``TextTokenizer`` protocol.

The same vocabulary serves the inner monologue (ids the LM samples) and the oracle stream (chunks of the
back-end LLM's answer are encoded with it), so both streams display and compare the same way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import sentencepiece

from ..protocols import TextTokenizer

WORD_BOUNDARY = "\u2581"  # sentencepiece's '▁', shown as a leading space



class LMTokenizer(TextTokenizer, Protocol):
    """A text tokenizer that also tells padding ids (the LM's own, or a stand-in for random weights)."""

    def is_padding(self, token_id: int) -> bool: ...

class SentencePieceTokenizer:
    """``TextTokenizer`` over a sentencepiece model, with the LM's special ids.

    Args:
        processor: the loaded sentencepiece model.
        start_token_id: id fed on the oracle stream at a reset (the LM's ``text_initial_token_id``, i.e.
            ``text_card``; it is outside the sentencepiece vocabulary).
        padding_token_id: the LM's text padding id (3 for Moshi).
        end_padding_token_id: the LM's end-of-padding id (0 for Moshi), also shown as nothing.
    """

    def __init__(self, processor: sentencepiece.SentencePieceProcessor, start_token_id: int,
                 padding_token_id: int = 3, end_padding_token_id: int = 0) -> None:
        self._sp = processor
        self._start = start_token_id
        self._padding = padding_token_id
        self._end_padding = end_padding_token_id
        self._silent = {start_token_id, padding_token_id, end_padding_token_id}

    @classmethod
    def from_file(cls, path: str | Path, start_token_id: int, padding_token_id: int = 3,
                  end_padding_token_id: int = 0) -> SentencePieceTokenizer:
        processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
        return cls(processor, start_token_id, padding_token_id, end_padding_token_id)

    @property
    def start_token_id(self) -> int:
        return self._start

    @property
    def padding_token_id(self) -> int:
        return self._padding

    @property
    def vocab_size(self) -> int:
        return int(self._sp.get_piece_size())

    def encode(self, text: str) -> list[int]:
        return list(self._sp.encode(text, out_type=int))

    def is_padding(self, token_id: int) -> bool:
        """Whether ``token_id`` means "nothing said" on a text stream."""
        return token_id in (self._padding, self._end_padding)

    def piece(self, token_id: int) -> str:
        """Display text of one id; special, control and out-of-vocabulary ids display as ``""``."""
        if token_id in self._silent or not 0 <= token_id < self.vocab_size:
            return ""
        if self._sp.is_control(token_id) or self._sp.is_unknown(token_id):
            return ""
        return self._sp.id_to_piece(token_id).replace(WORD_BOUNDARY, " ")
