"""The sound's score of a pause asked a frame early: :class:`~kame_core.turns.quiet_tail.QuietTail` hears the level
drop before Silero's end, and the ``smart-turn`` floor (which ``fused`` reads) asks Smart Turn then, keeps that score
for the pause the VAD confirms, and drops it when the user goes on."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kame_core.clock import SAMPLE_RATE
from kame_core.protocols import STTEvent
from kame_core.turns.floor_policies.smart_turn import QUIET_ASK_S, STALE_S, SmartTurnFloor
from kame_core.turns.listener import UserFloor
from kame_core.turns.quiet_tail import QUIET_DB, QuietTail

FRAME = 1920  # 80 ms at 24 kHz


def _tone(seconds: float, dbfs: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (10 ** (dbfs / 20) * np.sqrt(2) * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_the_quiet_tail_counts_quiet_below_the_speakers_own_peak_and_a_loud_window_resets_it() -> None:
    quiet = QuietTail(SAMPLE_RATE)
    quiet.hear(np.zeros(SAMPLE_RATE, np.float32))
    assert quiet.quiet_s == 0.0  # nothing was ever loud: silence alone is no one's pause
    quiet.hear(_tone(0.5, -40.0))  # a quiet microphone: -40 dBFS speech
    assert quiet.quiet_s == 0.0
    quiet.hear(_tone(0.05, -40.0 - QUIET_DB - 5.0))  # 35 dB under it: quiet, though not digital silence
    assert quiet.quiet_s == pytest.approx(0.05)
    quiet.hear(_tone(0.03, -40.0 - QUIET_DB + 10.0))  # only 20 dB under: a soft sound, not quiet
    assert quiet.quiet_s == 0.0
    for _ in range(3):  # frames of 80 ms, split anywhere: 10 ms windows carry across calls
        quiet.hear(np.zeros(1234, np.float32))
    assert quiet.quiet_s == pytest.approx(0.15)  # 3 x 1234 samples: 15 whole windows, the rest kept
    quiet.hear(np.array([np.nan] * 240, np.float32))  # a NaN window counts as loud
    assert quiet.quiet_s == 0.0
    with pytest.raises(ValueError, match="sample rate 0"):
        QuietTail(0)


class _Listener(UserFloor):
    """The floor's listener with the VAD's and the level's views set by the test (its own VAD hears nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.level_quiet_s = 0.0

    @property
    def quiet_s(self) -> float:
        return self.level_quiet_s

    def hear(self, user_frame: np.ndarray, frame_end_s: float) -> None:
        pass


def _floor() -> tuple[SmartTurnFloor, _Listener]:
    floor, listener = SmartTurnFloor(), _Listener()
    floor.listener = listener
    return floor, listener


def _frame(floor: SmartTurnFloor, listener: _Listener, end_s: float, *, quiet_s: float = 0.0,
           speech: str | None = None) -> tuple[float, np.ndarray] | None:
    """One frame ending at ``end_s``: the level's quiet, the VAD's event (``"start"`` / ``"end"``), then the ask."""
    listener.level_quiet_s = quiet_s
    if speech == "start":
        listener.voice.on_event(STTEvent("speech_start", start=end_s))
    elif speech == "end":
        listener.voice.on_event(STTEvent("speech_end", end=end_s))
    floor.hear(np.zeros(FRAME, np.float32), end_s)
    return floor.audio_to_score()


def test_the_quiet_before_the_vads_end_is_scored_then_and_that_score_is_the_pauses() -> None:
    floor, listener = _floor()
    assert _frame(floor, listener, 0.48, speech="start") is None
    assert _frame(floor, listener, 0.56, quiet_s=QUIET_ASK_S / 2) is None  # not quiet long enough
    asked = _frame(floor, listener, 0.64, quiet_s=QUIET_ASK_S)
    assert asked is not None and asked[0] == 0.64  # asked while the VAD still hears speech
    assert isinstance(asked[1], np.ndarray)
    assert math.isnan(floor.p_end())  # no pause yet
    assert _frame(floor, listener, 0.72, speech="end", quiet_s=0.12) is None  # the VAD confirms: nothing asked again
    assert math.isnan(floor.p_end())  # the early score is in flight
    assert floor.holds(0.72, "")
    floor.audio_scored(0.64, 0.9)
    assert floor.p_end() == 0.9 and not floor.holds(0.8, "")  # it is the pause's score
    assert _frame(floor, listener, 0.80, quiet_s=0.2) is None  # one score a pause


def test_an_early_score_answered_before_the_vads_end_is_read_on_the_end_frame() -> None:
    floor, listener = _floor()
    _frame(floor, listener, 0.48, speech="start")
    assert _frame(floor, listener, 0.56, quiet_s=0.05) is not None
    floor.audio_scored(0.56, 0.7)
    assert math.isnan(floor.p_end())  # the user still speaks, by the VAD
    assert _frame(floor, listener, 0.64, speech="end", quiet_s=0.13) is None
    assert floor.p_end() == 0.7  # on the very frame the VAD ends


def test_an_early_score_is_dropped_when_the_user_goes_on_and_the_next_pause_is_scored_at_its_onset() -> None:
    floor, listener = _floor()
    _frame(floor, listener, 0.48, speech="start")
    assert _frame(floor, listener, 0.56, quiet_s=0.05) is not None  # a stop consonant's closure, say
    assert _frame(floor, listener, 0.64, quiet_s=0.0) is None  # loud again: dropped
    assert _frame(floor, listener, 0.72, quiet_s=0.05) is None  # the first is still in flight: no second early ask
    floor.audio_scored(0.56, 0.99)  # the dropped score comes back: it is no pause's
    assert _frame(floor, listener, 0.80, quiet_s=0.0) is None
    asked = _frame(floor, listener, 0.88, speech="end")  # a pause the level did not foretell: asked at its onset
    assert asked is not None and asked[0] == 0.88
    assert math.isnan(floor.p_end())
    floor.audio_scored(0.88, 0.1)
    assert floor.p_end() == 0.1 and floor.holds(0.96, "")


def test_an_early_score_never_answered_does_not_stop_early_asks_for_long() -> None:
    floor, listener = _floor()
    _frame(floor, listener, 0.08, speech="start")
    assert _frame(floor, listener, 0.16, quiet_s=0.05) is not None  # never answered (a failed score, say)
    _frame(floor, listener, 0.24, quiet_s=0.0)
    assert _frame(floor, listener, 0.32, quiet_s=0.05) is None
    _frame(floor, listener, 0.40, quiet_s=0.0)
    later = 0.16 + STALE_S + 0.08
    asked = _frame(floor, listener, later, quiet_s=0.05)
    assert asked is not None and asked[0] == later
