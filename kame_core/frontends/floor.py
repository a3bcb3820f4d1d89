"""Turn-taking for the CPU stand-in: does the user hold the floor right now?

The trained front-end hears the user's audio and has learned not to talk over them. The stand-in imitates
that by listening to the same 80 ms user frames with Silero VAD (the model faster-whisper ships) and by
looking at how the transcript so far ends: after a question mark a short pause is enough to take the turn,
after a full stop a longer one, mid-sentence a long one. While the user holds the floor the stand-in does
not start new words (a word already begun is finished); it picks up where it was once the floor is free.
Audio the VAD never hears as speech (tones in tests, silence) never holds the floor.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..audio_io import StreamResampler
from ..clock import SAMPLE_RATE

VAD_RATE = 16000


@dataclass(frozen=True)
class FloorConfig:
    """Pauses after which the user yields the floor, by how their transcript ends (voice itself is judged
    with the streaming STT's VAD thresholds, :class:`~kame_core.stt.vad.VadConfig`)."""

    after_question_s: float = 0.1
    after_sentence_s: float = 0.35
    mid_sentence_s: float = 0.8

    def pause_needed(self, transcript: str) -> float:
        end = transcript.rstrip().rstrip("\"')]")[-1:]
        if end == "?":
            return self.after_question_s
        return self.after_sentence_s if end in (".", "!") else self.mid_sentence_s


class UserFloor:
    """Follows the user's voice frame by frame (one instance per session)."""

    def __init__(self, config: FloorConfig | None = None) -> None:
        from ..stt.vad import StreamingSileroVAD, VadConfig

        self.config = config or FloorConfig()
        self._thresholds = VadConfig()
        self._vad = StreamingSileroVAD()
        self._resampler = StreamResampler(SAMPLE_RATE, VAD_RATE)
        self._heard_voice = False
        self._voiced = False
        self._silent_since = 0.0

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        """Feed the user's frame that ends at ``frame_end_s`` (session time)."""
        vad = self._thresholds
        for p in self._vad.push(self._resampler.push(user_frame)):
            if p >= vad.threshold:
                self._heard_voice = self._voiced = True
            elif p < vad.neg_threshold and self._voiced:
                self._voiced = False
                self._silent_since = frame_end_s

    def user_holds_floor(self, now_s: float, transcript: str) -> bool:
        """True while the user speaks, or has paused for less than the transcript's ending calls for."""
        if not self._heard_voice:
            return False
        if self._voiced:
            return True
        return now_s - self._silent_since < self.config.pause_needed(transcript)
