"""Semantic end of turn: how likely the user's turn is complete, judged from the transcript so far.

:class:`SmolLMEndOfTurn` asks the offline SmolLM2-135M-Instruct (the copy the oracle stand-in already loads) how
likely the user's words end right here: the probability of its chat template's end-of-turn token or of a
sentence's last mark (. ? !) next -- LiveKit's turn detector reads the end-of-turn token of a tuned SmolLM; the
untuned model puts almost no mass on it (1e-8 to 1e-3) but readily closes a finished sentence.
:func:`turn_is_over` combines that probability with the silence so far: a short silence ends a turn that reads
complete, a long one ends any turn.

The words are scored without punctuation (:func:`spoken_words`): Whisper punctuates a partial transcript as it
likes ("Could you tell me how to?"). On the synthetic set's texts (``fdb-synth``) the 18 complete questions score
0.002 to 0.9 (all but one above 0.06) and the 16 first halves of paused questions 2e-6 to 3e-4. What still
fools it is the STT: Whisper sometimes finishes a cut-off sentence with a word nobody said ("Why do cats like
this?"). :class:`EndOfTurnConfig`'s defaults were chosen on that set's tuning half
(``benchmarks/eot_gate_tuning.py``).
"""
from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record.trace import Provenance

#: the most words of the transcript the model reads (the end of a long turn decides; a bomb costs nothing more)
MAX_WORDS = 60
_CACHE = 64


@dataclass(frozen=True)
class EndOfTurnConfig:
    """When a turn is over: probability ``complete_p`` or more and ``after_complete_s`` of silence, or
    ``any_turn_s`` of silence whatever the text.

    The defaults were chosen on the tuning half of ``fdb-synth --seed 0`` (``benchmarks/eot_gate_tuning.py``: 22
    Piper inputs; half the complete questions and every paused one cut between two words of one utterance): no
    pause and no hesitation released, every complete question given the floor within 1 s, median 0.14 s after the
    speech ended (the VAD's own lag: the floor is given on the first silent frame when the words read complete).
    Held out: 1 of 8 pauses released (Whisper heard a finished sentence in the pause) and 1 of 9 hesitations, 8
    of 9 questions given the floor within 1 s, median 0.14 s (the stand-in's rule: 8 of 8 pauses, 2 of 9
    hesitations, 0.30 s)."""

    complete_p: float = 0.06
    after_complete_s: float = 0.0
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

#: filled pauses: a turn whose words end in one is being held, not ended (the speaker is searching for a word)
FILLERS = frozenset({"uh", "um", "uhm", "umm", "er", "erm", "ah", "eh"})


def ends_in_filler(text: str) -> bool:
    """Whether the spoken words of ``text`` end in a filled pause ("what did you do before uh")."""
    words = spoken_words(text).lower().split()
    return bool(words) and words[-1] in FILLERS


#: the chat template's end of turn
END_OF_TURN = "<|im_end|>"
#: a finished sentence's last mark (as a token: with or without the tokenizer's leading space, or closing a quote)
SENTENCE_MARKS = (".", "?", "!")


def ending_token_ids(tokenizer: Any) -> tuple[int, ...]:
    """The ids of the tokens that end the turn or a sentence in ``tokenizer``'s vocabulary (:data:`END_OF_TURN`,
    :data:`SENTENCE_MARKS`)."""
    endings = {END_OF_TURN} | {m + q for m in SENTENCE_MARKS for q in ("", '"')}
    ids = {i for token, i in tokenizer.get_vocab().items() if token.removeprefix("\u0120") in endings}
    if not ids:
        raise ValueError("the tokenizer has no end-of-turn or sentence-ending tokens")
    return tuple(sorted(ids))


def spoken_words(text: str) -> str:
    """The last words of ``text`` as spoken: punctuation (the STT's guess, not the user's) left out."""
    return last_words(_NOT_SPOKEN.sub(" ", last_words(text, MAX_WORDS * 4)))


@dataclass
class SmolLMEndOfTurn:
    """P(end of turn | transcript) from SmolLM2's chat template (see the module docstring). One instance per
    process is enough (the model is shared); sessions may call it from several threads (one call at a time).

    ``precision``: ``float32``, ``bfloat16``, or ``auto`` -- bfloat16 where the CPU multiplies it in hardware
    (:func:`~kame_core.llm.smollm_model.cpu_has_native_bf16`), else float32. A score is on the live turn's critical
    path (the floor waits for it after the last partial): on a 2-core Zen 4 bfloat16 on one thread takes 84 ms
    where float32 takes 171 ms (119 ms on two); its log-odds differ from float32's by 0.40 at worst over 990
    transcripts (``tests/test_end_of_turn.py``)."""

    cache_root: Path | None = None
    precision: str = "auto"
    _model: Any = field(default=None, init=False, repr=False)
    _end_ids: tuple[int, ...] = field(default=(), init=False, repr=False)
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    #: the type the model computes in: ``precision`` with ``auto`` resolved on this CPU (once)
    dtype: str = field(default="float32", init=False)

    def __post_init__(self) -> None:
        from ..llm.smollm_model import DTYPES, cpu_has_native_bf16

        if self.precision not in ("auto", *DTYPES):
            raise ValueError(f"precision {self.precision!r}: one of auto, {', '.join(DTYPES)}")
        auto = "bfloat16" if cpu_has_native_bf16() else "float32"
        self.dtype = auto if self.precision == "auto" else self.precision

    @property
    def provenance(self) -> Provenance:
        return Provenance(kind="llm", model_id="SmolLM2-135M-Instruct",
                          label="probability that the words end the turn or a sentence, from the untuned SmolLM2"
                                f" ({self.dtype})")

    def load(self) -> SmolLMEndOfTurn:
        """Load the model now (else on the first call)."""
        if self._model is None:
            from ..llm.smollm_model import load_generator

            self._model = load_generator(self.cache_root, self.dtype)
            self._end_ids = ending_token_ids(self._model.tokenizer)
        return self

    def probability(self, transcript: str) -> float:
        """The probability that the user's turn ends after ``transcript``; punctuation is not read
        (:func:`spoken_words`). 0.0 for no words, and for words that end in a filled pause (:func:`ends_in_filler`:
        the untuned model reads "... before uh" as likely finished, 0.1, where a listener hears the speaker
        holding the turn)."""
        text = spoken_words(transcript)
        if not text or ends_in_filler(text):
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
        prompt = self._model.chat_text([{"role": "user", "content": text}])
        prompt = prompt[:prompt.rindex(END_OF_TURN)]  # the user's text, what comes next left to predict
        with torch.inference_mode():
            logits = self._model.logits(self._model.token_ids(prompt, special=True), []).float()
        return float(torch.softmax(logits, dim=-1)[list(self._end_ids)].sum().clamp(0.0, 1.0))
