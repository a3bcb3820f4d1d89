"""Semantic end of turn: how likely the user's turn is complete, judged from the transcript so far.

:class:`SmolLMEndOfTurn` asks the offline SmolLM2-135M-Instruct (the copy the oracle stand-in already loads) for the
probability of its chat template's end-of-turn token right after the user's text -- the idea of LiveKit's turn
detector, on the untuned model. :func:`turn_is_over` combines that probability with the silence so far: a short
silence ends a turn that reads complete, a long one ends any turn.

The words are scored without punctuation (:func:`spoken_words`): with it, the untuned model mostly reads the
punctuation, and Whisper punctuates a partial transcript as it likes -- "Could you tell me how to?" scored 0.16 and a
mid-sentence pause released the floor. Without it, on the synthetic set's texts (``fdb-synth``), the 18 complete
questions score 1e-8 to 2e-3 (log10 -8.1 to -2.8) and the 16 first halves of paused questions 1e-12 to 3e-9 (log10
-12 to -8.5): the probabilities are tiny, their order is the signal. :class:`EndOfTurnConfig`'s defaults were
chosen on that set's tuning half (``benchmarks/eot_gate_tuning.py``).
"""
from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .trace import Provenance

#: the most words of the transcript the model reads (the end of a long turn decides; a bomb costs nothing more)
MAX_WORDS = 60
_CACHE = 64


@dataclass(frozen=True)
class EndOfTurnConfig:
    """When a turn is over: probability ``complete_p`` or more and ``after_complete_s`` of silence, or
    ``any_turn_s`` of silence whatever the text.

    The defaults were chosen on the tuning half of ``fdb-synth --seed 0`` (``benchmarks/eot_gate_tuning.py``: 22
    Piper inputs, half the complete questions with a 0.12-0.32 s hesitation between two words): no pause and no
    hesitation released, every complete question given the floor within 1 s, median 0.50 s. After 80 ms instead of
    0.32 s, 22 % of the questions were cut into at a hesitation. Held out: no pause or hesitation released (the
    stand-in's rule: 8 of 8 pauses, 2 of 9 hesitations), median latency 0.53 s, 2 of 9 complete questions read as
    incomplete and waited ``any_turn_s``."""

    complete_p: float = 1e-7
    after_complete_s: float = 0.32
    any_turn_s: float = 2.4

    def __post_init__(self) -> None:
        if not 0.0 <= self.complete_p <= 1.0:  # NaN fails too
            raise ValueError(f"complete_p {self.complete_p!r}: a probability from 0 to 1")
        for name in ("after_complete_s", "any_turn_s"):
            value = getattr(self, name)
            if not 0.0 <= value < 60.0:
                raise ValueError(f"{name} {value!r}: seconds from 0 to 60")


def turn_is_over(p_complete: float, silence_s: float, config: EndOfTurnConfig = EndOfTurnConfig()) -> bool:
    """Whether the user's turn is over after ``silence_s`` of silence, given the probability that its text is
    complete (a NaN probability counts as incomplete)."""
    if silence_s >= config.any_turn_s:
        return True
    return not math.isnan(p_complete) and p_complete >= config.complete_p and silence_s >= config.after_complete_s


def last_words(text: str, limit: int = MAX_WORDS) -> str:
    """The last ``limit`` words of ``text``, whitespace collapsed."""
    if not isinstance(text, str):
        raise TypeError(f"a transcript is text, got {type(text).__name__}")
    return " ".join(text.split()[-limit:])


_NOT_SPOKEN = re.compile(r"[^\w\s']")


def spoken_words(text: str) -> str:
    """The last words of ``text`` as spoken: punctuation (the STT's guess, not the user's) left out."""
    return last_words(_NOT_SPOKEN.sub(" ", last_words(text, MAX_WORDS * 4)))


@dataclass
class SmolLMEndOfTurn:
    """P(end of turn | transcript) from SmolLM2's chat template (see the module docstring). One instance per
    process is enough (the model is shared); sessions may call it from several threads (one call at a time)."""

    cache_root: Path | None = None
    _model: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)
    _end_id: int = field(default=-1, init=False, repr=False)
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def provenance(self) -> Provenance:
        return Provenance(kind="llm", model_id="SmolLM2-135M-Instruct",
                          label="end-of-turn probability from the untuned SmolLM2 chat template")

    def load(self) -> SmolLMEndOfTurn:
        """Load the model now (else on the first call)."""
        if self._model is None:
            from .llm.local_smollm import load_smollm2

            self._model, self._tokenizer = load_smollm2(self.cache_root)
            self._end_id = int(self._tokenizer.convert_tokens_to_ids("<|im_end|>"))
        return self

    def probability(self, transcript: str) -> float:
        """The probability that the user's turn ends after ``transcript`` (0.0 for no words); punctuation is not
        read (:func:`spoken_words`)."""
        text = spoken_words(transcript)
        if not text:
            return 0.0
        with self._lock:
            return self._probability(text)

    def _probability(self, text: str) -> float:
        if text in self._seen:  # partials repeat: the same text is scored once
            self._seen.move_to_end(text)
            return self._seen[text]
        p = self._score(text)
        self._seen[text] = p
        if len(self._seen) > _CACHE:
            self._seen.popitem(last=False)
        return p

    def _score(self, text: str) -> float:
        import torch

        self.load()
        prompt = self._tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                     add_generation_prompt=False)
        prompt = prompt[:prompt.rindex("<|im_end|>")]  # the user's text, its end-of-turn token left to predict
        ids = self._tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = self._model(ids).logits[0, -1].float()
        return float(torch.softmax(logits, dim=-1)[self._end_id])
