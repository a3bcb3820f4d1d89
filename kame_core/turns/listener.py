"""Turn-taking for the CPU stand-in: does the user hold the floor right now?

The trained front-end hears the user's audio and has learned not to talk over them. The stand-in imitates
that by listening to the same 80 ms user frames with Silero VAD (the model faster-whisper ships) and by
looking at how the transcript so far ends: after a question mark a short pause is enough to take the turn,
after a full stop a longer one, mid-sentence a long one. The voice it hears becomes speech start / end
events for a :class:`~kame_core.turns.tracker.UserTurnTracker`, whose
:meth:`~kame_core.turns.tracker.UserTurnTracker.holds_floor` is the rule (the same tracker and thresholds as
everywhere else). While the user holds the floor the stand-in does not start new words (a word already
begun is finished). Audio the VAD never hears as speech (tones in tests, silence) never holds the floor.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..audio_io import StreamResampler
from ..clock import SAMPLE_RATE
from ..protocols import STTEvent
from .quiet_tail import QuietTail
from .tracker import TurnConfig, UserTurnTracker

VAD_RATE = 16000


class UserFloor:
    """Follows the user's voice frame by frame (one instance per session). ``keep_s``: also keep the last that
    many seconds of the user's audio as heard (16 kHz, :meth:`recent`), for a policy that scores the sound;
    ``track_quiet``: also follow how long it has been quiet by its level (:attr:`quiet_s`), for a policy that scores
    it ahead of the VAD's end (the others' frames skip that work)."""

    def __init__(self, config: TurnConfig | None = None, keep_s: float = 0.0, track_quiet: bool = False) -> None:
        from ..stt.vad import StreamingSileroVAD, VadConfig

        self.voice = UserTurnTracker(config or TurnConfig())
        self._thresholds = VadConfig()
        self._vad = StreamingSileroVAD()
        self._resampler = StreamResampler(SAMPLE_RATE, VAD_RATE)
        self._quiet = QuietTail(SAMPLE_RATE) if track_quiet else None
        self._keep = max(0, int(keep_s * VAD_RATE))
        self._chunks: deque[np.ndarray] = deque()  # the audio heard, oldest first, at least ``keep_s`` when it can be
        self._kept = 0

    def recent(self) -> np.ndarray:
        """The last ``keep_s`` of the user's audio heard so far, at 16 kHz (a copy)."""
        if not self._chunks:
            return np.zeros(0, np.float32)
        return np.concatenate(self._chunks)[-self._keep:]

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        """Feed the user's frame that ends at ``frame_end_s`` (session time)."""
        vad, voice = self._thresholds, self.voice
        if self._quiet is not None:
            self._quiet.hear(user_frame)
        audio = self._resampler.push(user_frame)
        if self._keep and len(audio):
            self._chunks.append(audio)
            self._kept += len(audio)
            while self._kept - len(self._chunks[0]) >= self._keep:  # the oldest chunk is no longer needed
                self._kept -= len(self._chunks.popleft())
        for p in self._vad.push(audio):
            if p >= vad.threshold and not voice.speaking:
                voice.on_event(STTEvent("speech_start", start=frame_end_s))
            elif p < vad.neg_threshold and voice.speaking:
                voice.on_event(STTEvent("speech_end", end=frame_end_s))

    @property
    def quiet_s(self) -> float:
        """Seconds the user's audio has been quiet by its level (:mod:`.quiet_tail`): a candidate end the VAD has
        not confirmed yet (0 while the last 10 ms are loud, and always 0 unless made with ``track_quiet``)."""
        return self._quiet.quiet_s if self._quiet is not None else 0.0

    def silence_s(self, now_s: float) -> float | None:
        """Seconds since the user last stopped speaking (None while they speak or before they spoke)."""
        voice = self.voice
        return None if voice.speaking or voice.last_end is None else max(0.0, now_s - voice.last_end)

    def user_holds_floor(self, now_s: float, transcript: str) -> bool:
        """True while the user speaks, or has paused for less than the transcript's ending calls for."""
        return self.voice.holds_floor(now_s, transcript)
