"""``fused``: the end of the turn by its words and its sound together. Silero VAD says when the user stops; the
gate's detector reads the transcript (SmolLM2, :mod:`.gate`) and Smart Turn v3.2 the pause's last 8 s of audio
(:mod:`.smart_turn`); :func:`fused_is_over` combines the two readings (:class:`FusedConfig`: each its threshold,
``and`` or ``or``), and a long silence ends the turn whatever they say. The rule and its thresholds were chosen on
``fdb-synth``'s tuning half (``benchmarks/eot_gate_tuning.py``; docs/evaluation.md has the table)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .base import FloorPolicy, finite_or_none
from .gate import GateFloor
from .smart_turn import SmartTurnFloor


@dataclass(frozen=True)
class FusedConfig:
    """The turn is over after ``after_complete_s`` of silence when the words read complete (p >= ``text_p``)
    ``combine`` the sound reads complete (p >= ``audio_p``), or after ``any_turn_s`` of silence whatever they say.

    The defaults were chosen on the tuning half of ``fdb-synth --seed 0`` (``benchmarks/eot_gate_tuning.py``, 360
    configs): "and" with the gate's text threshold and a low sound threshold -- the sound vetoes a transcript that
    reads complete in a pause (Whisper finishing the sentence) -- no pause or hesitation released, every question
    given the floor within 1 s, median 0.14 s. Held out: 0 of 8 pauses released (the gate alone: 1), 1 of 9
    hesitations, 7 of 9 questions within 1 s (the gate: 8), median 0.17 s. "or" was faster (median 0.13 s, every
    question within 1 s) but released 5 of 8 pauses: Smart Turn hears Piper's cut phrases as finished."""

    text_p: float = 0.06
    audio_p: float = 0.2
    combine: Literal["and", "or"] = "and"
    after_complete_s: float = 0.0
    any_turn_s: float = 2.4

    def __post_init__(self) -> None:
        for name in ("text_p", "audio_p"):
            if not 0.0 <= getattr(self, name) <= 1.0:  # NaN fails too
                raise ValueError(f"{name} {getattr(self, name)!r}: a probability from 0 to 1")
        if self.combine not in ("and", "or"):
            raise ValueError(f"combine {self.combine!r}: 'and' or 'or'")
        for name in ("after_complete_s", "any_turn_s"):
            if not 0.0 <= getattr(self, name) < 60.0:
                raise ValueError(f"{name} {getattr(self, name)!r}: seconds from 0 to 60")


def fused_is_over(p_text: float, p_audio: float, silence_s: float, config: FusedConfig) -> bool:
    """Whether the turn is over after ``silence_s`` of silence, given the two probabilities (NaN: not scored yet,
    which reads as not complete)."""
    if silence_s >= config.any_turn_s:
        return True
    if silence_s < config.after_complete_s:
        return False
    words = not math.isnan(p_text) and p_text >= config.text_p
    sound = not math.isnan(p_audio) and p_audio >= config.audio_p
    return (words and sound) if config.combine == "and" else (words or sound)


def fused_holds(speaking: bool, silence_s: float | None, p_text: float, p_audio: float,
                config: FusedConfig) -> bool:
    """The fused rule: the user holds the floor while speaking, and once silent until :func:`fused_is_over`
    (``silence_s`` None: nobody spoke yet, nobody holds it)."""
    if speaking:
        return True
    if silence_s is None:
        return False
    return not fused_is_over(p_text, p_audio, silence_s, config)


class FusedFloor(FloorPolicy):
    """The gate's transcript scores and Smart Turn's pause scores over one shared listener (one VAD)."""

    name = "fused"
    scores_transcripts = True
    scores_audio = True

    def __init__(self, config: FusedConfig | None = None) -> None:
        self.config = config or FusedConfig()
        self.sound = SmartTurnFloor()
        self.listener = self.sound.listener  # one VAD hears the user for both
        self.words = GateFloor(listener=self.listener)

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        self.sound.hear(user_frame, frame_end_s)  # the shared listener hears it once

    def to_score(self, transcript: str) -> str | None:
        return self.words.to_score(transcript)

    def scored(self, text: str, p_end: float) -> None:
        self.words.scored(text, p_end)

    def dropped(self, text: str) -> None:
        self.words.dropped(text)

    def audio_to_score(self) -> tuple[float, np.ndarray] | None:
        return self.sound.audio_to_score()

    def audio_scored(self, audio_to_s: float, p_end: float) -> None:
        self.sound.audio_scored(audio_to_s, p_end)

    def holds(self, now_s: float, transcript: str) -> bool:
        return fused_holds(self.listener.voice.speaking, self.listener.silence_s(now_s),
                           self.words.p_end(transcript), self.sound.p_end(), self.config)

    def settings(self) -> dict[str, float | str]:
        return dataclasses.asdict(self.config)

    def detail(self, now_s: float, transcript: str) -> dict[str, float]:
        out = {"p_end": finite_or_none(self.words.p_end(transcript)),
               "p_end_audio": finite_or_none(self.sound.p_end()),
               "silence_s": finite_or_none(self.listener.silence_s(now_s))}
        return {k: v for k, v in out.items() if v is not None}
