"""``gate``: a semantic end-of-turn gate. Silero VAD says when the user stops; the end-of-turn detector
(:class:`kame_core.turns.end_of_turn.SmolLMEndOfTurn`) says how likely the transcript so far is a complete turn; the
turn is over after a short silence when it reads complete, after a long one whatever it says
(:func:`kame_core.turns.end_of_turn.turn_is_over`). A transcript not scored yet counts as incomplete."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..end_of_turn import EndOfTurnConfig, spoken_words, turn_is_over
from ..listener import UserFloor
from .base import FloorPolicy, finite_or_none

#: transcripts whose probability a session keeps (the latest ones decide)
_KEEP = 32


class GateFloor(FloorPolicy):
    """Holds while the user speaks, and after they stop until :func:`turn_is_over` says the turn ended."""

    name = "gate"
    scores_transcripts = True

    def __init__(self, config: EndOfTurnConfig | None = None, listener: UserFloor | None = None) -> None:
        self.config = config or EndOfTurnConfig()
        self.listener = listener or UserFloor()
        self._p: dict[str, float] = {}

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        self.listener.hear(user_frame, frame_end_s)

    def to_score(self, transcript: str) -> str | None:
        text = spoken_words(transcript)
        if not text or text in self._p:
            return None  # scored, or being scored (partials repeat while the user pauses)
        self._p[text] = math.nan
        while len(self._p) > _KEEP:
            self._p.pop(next(iter(self._p)))
        return text

    def scored(self, text: str, p_end: float) -> None:
        self._p[text] = float(p_end)

    def dropped(self, text: str) -> None:
        if math.isnan(self._p.get(text, 0.0)):
            del self._p[text]

    def p_end(self, transcript: str) -> float:
        """The end-of-turn probability of ``transcript`` (NaN until it was scored; 0 for no words)."""
        text = spoken_words(transcript)
        return self._p.get(text, math.nan) if text else 0.0

    def silence_s(self, now_s: float) -> float | None:
        """Seconds since the user last stopped speaking (None while they speak or before they spoke)."""
        return self.listener.silence_s(now_s)

    def holds(self, now_s: float, transcript: str) -> bool:
        return gate_holds(self.listener.voice.speaking, self.silence_s(now_s), self.p_end(transcript), self.config)

    def settings(self) -> dict[str, float | str]:
        return dataclasses.asdict(self.config)

    def detail(self, now_s: float, transcript: str) -> dict[str, float]:
        out = {"p_end": finite_or_none(self.p_end(transcript)), "silence_s": finite_or_none(self.silence_s(now_s))}
        return {k: v for k, v in out.items() if v is not None}


def gate_holds(speaking: bool, silence_s: float | None, p_end: float, config: EndOfTurnConfig) -> bool:
    """The gate's rule: the user holds the floor while speaking, and once silent until :func:`turn_is_over` says
    the turn ended (``silence_s`` None: nobody spoke yet, nobody holds it; a NaN ``p_end``: not scored yet)."""
    if speaking:
        return True
    if silence_s is None:
        return False
    return not turn_is_over(p_end, silence_s, config)
