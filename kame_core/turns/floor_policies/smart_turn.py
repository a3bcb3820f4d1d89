"""``smart-turn``: the end of the turn by its sound. Silero VAD says when the user stops; at each pause Smart Turn
v3.2 (:class:`kame_core.turns.smart_turn.SmartTurn`, the model the pipecat-ai wheel ships) reads the last 8 s of their
audio at the pause's onset (the VAD's first silent frame), and the turn is over when it sounds complete (p >= 0.5,
the threshold the model is shipped with), after a long silence whatever it says
(:func:`kame_core.turns.end_of_turn.turn_is_over`, the gate's rule). It needs no transcript: it can decide before the
STT has caught up. A pause not scored yet counts as unfinished.

pipecat runs the model after 0.2 s of silence; scored 0.24 s into a pause it heard ``fdb-synth``'s cut phrases as
finished (``benchmarks/eot_gate_tuning.py``: 5 of 8 mid-sentence pauses released at p >= 0.5 on the tuning half,
7 of 8 held out), and the fused floor lost its veto and gained 0.3 s of latency: the onset it is.

The onset, though, is when the VAD *says* the user stopped: 0.07-0.17 s after the sound did
(:mod:`kame_core.turns.quiet_tail`), and a score takes 0.06-0.2 s on a busy 2-core CPU, so in real time the score of
the pause came a frame or two after the VAD's end and ``fused`` answered ~0.16 s after the gate. So the score is
asked a frame sooner, on the first frame whose audio has gone quiet (:data:`QUIET_ASK_S` of quiet by its level while
the VAD still hears speech): when the VAD then confirms the pause with no loud window in between, that score (in
flight or done) is the pause's; when the user goes on, it is dropped, and a pause the level did not foretell is
scored at its onset as before. One such early score is in flight at a time (a stop consonant's closure can be quiet
too)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..end_of_turn import EndOfTurnConfig
from ..listener import UserFloor
from ..smart_turn import WINDOW_S
from .base import FloorPolicy, finite_or_none
from .gate import gate_holds

#: the model's own threshold (pipecat's LocalSmartTurnAnalyzerV3: complete when p > 0.5); the gate's long silence
SMART_TURN_CONFIG = EndOfTurnConfig(complete_p=0.5)
#: quiet by its level this long, while the VAD still hears speech: score the audio now, ahead of the VAD's end
QUIET_ASK_S = 0.04
#: an early score unanswered this long (seconds of audio) no longer keeps the next one from being asked
STALE_S = 1.0


class SmartTurnFloor(FloorPolicy):
    """Holds while the user speaks, and after they stop until the pause's audio sounds complete (or lasts long)."""

    name = "smart-turn"
    scores_audio = True

    def __init__(self, config: EndOfTurnConfig | None = None) -> None:
        self.config = config or SMART_TURN_CONFIG
        self.listener = UserFloor(keep_s=WINDOW_S, track_quiet=True)
        self._heard_to = 0.0  # the end of the latest frame heard
        self._early: float | None = None  # the early score of a quiet the VAD has not confirmed (its audio's end)
        self._early_p = math.nan  # its probability (NaN until scored)
        self._in_flight: float | None = None  # the audio end of the early score asked and not answered yet
        self._pause: float | None = None  # the pause that has its score (when it began: the VAD's end of speech)
        self._scored_to: float | None = None  # the end of the audio that scores it (an early score's, or the onset's)
        self._p = math.nan  # its probability (NaN until scored)

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        self.listener.hear(user_frame, frame_end_s)
        self._heard_to = frame_end_s

    def audio_to_score(self) -> tuple[float, np.ndarray] | None:
        listener, voice = self.listener, self.listener.voice
        if voice.speaking:
            if listener.quiet_s < QUIET_ASK_S:
                self._early = None  # loud again: the user went on, that early score is not a pause's
            elif self._early is None and (self._in_flight is None or self._heard_to - self._in_flight > STALE_S):
                self._early, self._early_p = self._heard_to, math.nan
                self._in_flight = self._heard_to
                return self._heard_to, listener.recent()
            return None
        if voice.last_end is None or voice.last_end == self._pause:
            return None
        self._pause, self._p = voice.last_end, math.nan
        if self._early is not None:  # the VAD confirms the quiet it was asked at: that score is this pause's
            self._scored_to, self._p, self._early = self._early, self._early_p, None
            return None
        self._scored_to = self._heard_to
        return self._heard_to, listener.recent()

    def audio_scored(self, audio_to_s: float, p_end: float) -> None:
        if audio_to_s == self._in_flight:
            self._in_flight = None
        if audio_to_s == self._early:
            self._early_p = float(p_end)
        if self._pause is not None and audio_to_s == self._scored_to:  # an earlier pause's answer changes nothing
            self._p = float(p_end)

    def p_end(self) -> float:
        """The current pause's probability (NaN until scored, or while the user speaks)."""
        voice = self.listener.voice
        return self._p if not voice.speaking and voice.last_end == self._pause else math.nan

    def holds(self, now_s: float, transcript: str) -> bool:
        return gate_holds(self.listener.voice.speaking, self.listener.silence_s(now_s), self.p_end(), self.config)

    def settings(self) -> dict[str, float | str]:
        return dataclasses.asdict(self.config)

    def detail(self, now_s: float, transcript: str) -> dict[str, float]:
        out = {"p_end_audio": finite_or_none(self.p_end()),
               "silence_s": finite_or_none(self.listener.silence_s(now_s))}
        return {k: v for k, v in out.items() if v is not None}
