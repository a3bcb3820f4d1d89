"""What a floor policy is: per session, from the user's audio and transcript, whether the user holds the floor now.

While a policy says the user holds the floor, the tandem pipeline holds the front-end (padding text and silence: the
forced delay's mechanism, so it works for the neural front-end as for the stand-in) and releases it the frame the
policy says the turn ended (:class:`~kame_core.pipelines.tandem.TandemPipeline`). One instance per session.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np


class FloorPolicy(ABC):
    """Whether the user holds the floor (see the module docstring)."""

    #: the id recorded in traces (``config.floor``)
    name: ClassVar[str]
    #: the policy reads the end-of-turn detector's probability of the transcript (the pipeline scores it)
    scores_transcripts: ClassVar[bool] = False
    #: the policy reads the audio end-of-turn detector's probability of the user's recent audio (the pipeline
    #: scores it)
    scores_audio: ClassVar[bool] = False

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:  # noqa: B027 - most policies listen
        """The user's frame that ends at ``frame_end_s`` (session time); called every frame, before :meth:`holds`."""

    def to_score(self, transcript: str) -> str | None:
        """The text whose end-of-turn probability this policy wants after the transcript changed (None: none)."""
        return None

    def scored(self, text: str, p_end: float) -> None:  # noqa: B027 - only policies that score keep it
        """The end-of-turn probability of ``text`` (as :meth:`to_score` gave it) is ``p_end``."""

    def dropped(self, text: str) -> None:  # noqa: B027 - only policies that score keep it
        """``text`` (as :meth:`to_score` gave it) will not be scored: a newer transcript came before its turn; should
        the transcript read so again, :meth:`to_score` asks for it again."""

    def audio_to_score(self) -> tuple[float, np.ndarray] | None:
        """After :meth:`hear`: (the session time the audio ends, the user's recent 16 kHz audio up to then) when this
        policy wants it scored; None otherwise."""
        return None

    def audio_scored(self, audio_to_s: float, p_end: float) -> None:  # noqa: B027 - only policies that score keep it
        """The audio end-of-turn probability of the user's audio up to ``audio_to_s`` is ``p_end``."""

    @abstractmethod
    def holds(self, now_s: float, transcript: str) -> bool:
        """True while the user holds the floor at session time ``now_s``, given the transcript so far."""

    def detail(self, now_s: float, transcript: str) -> dict[str, float]:
        """What the latest decision rested on, for the trace's hold events (probability, silence)."""
        return {}

    def settings(self) -> dict[str, float | str]:
        """The thresholds it decides with, as a trace records them (``config.floor_settings``; none: empty)."""
        return {}


def finite_or_none(value: float | None) -> float | None:
    """``value`` to 3 significant digits (an end-of-turn probability may be 1e-9: places would round it to 0), None
    when it is absent or not finite (a trace holds no NaN)."""
    return None if value is None or not math.isfinite(value) else float(f"{float(value):.3g}")
