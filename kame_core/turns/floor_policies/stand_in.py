"""``stand-in``: the stand-in's heuristic as a hold on any front-end: Silero VAD on the user's frames and a pause
that depends on how the transcript ends (short after '?', longer after '.', long mid-sentence;
:meth:`kame_core.turns.tracker.TurnConfig.pause_needed`)."""
from __future__ import annotations

import numpy as np

from ..listener import UserFloor
from ..tracker import TurnConfig
from .base import FloorPolicy


class StandInFloor(FloorPolicy):
    """Holds while the user speaks or has paused less than the transcript's ending calls for."""

    name = "stand-in"

    def __init__(self, config: TurnConfig | None = None) -> None:
        self.listener = UserFloor(config)

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        self.listener.hear(user_frame, frame_end_s)

    def holds(self, now_s: float, transcript: str) -> bool:
        return self.listener.user_holds_floor(now_s, transcript)

    def detail(self, now_s: float, transcript: str) -> dict[str, float]:
        voice = self.listener.voice
        if voice.speaking or voice.last_end is None:
            return {}
        return {"silence_s": round(now_s - voice.last_end, 3)}
