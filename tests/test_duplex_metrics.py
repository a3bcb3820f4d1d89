"""Full-Duplex-Bench timing metrics on hand-made traces: takeover, turn-taking latency, stop latency."""
from __future__ import annotations

import numpy as np
import pytest

from kame_core.analysis.duplex_metrics import duplex_metrics, model_speech_segments, pool
from kame_core.clock import FRAME_SECONDS, SAMPLE_RATE, SAMPLES_PER_FRAME
from kame_core.record.events import UserSpeechEnd, UserSpeechStart
from kame_core.record.trace import FrameRecord, SessionTrace

from .doubles import tone


def frame(t: float) -> int:
    return int(round(t / FRAME_SECONDS))


def build(seconds: float, user: list[tuple[float, float]], words: list[tuple[float, str]],
          speech: list[tuple[float, float]]) -> SessionTrace:
    """A trace: user speech segments (events), inner-monologue words at times, loud output over ``speech``
    (times on the 80 ms grid)."""
    n = frame(seconds)
    text = {frame(t): w for t, w in words}
    loud = np.zeros(n, bool)
    for a, b in speech:
        loud[frame(a):frame(b)] = True
    trace = SessionTrace(mode="kame")
    silent = np.zeros(SAMPLES_PER_FRAME, np.float32)
    voice = tone(FRAME_SECONDS, 300.0)
    for i in range(n):
        piece = text.get(i, "")
        trace.append_frame(FrameRecord(text_piece=piece, text_token=7 if piece else None), silent,
                           voice if loud[i] else silent)
    for a, b in user:
        trace.record(a, UserSpeechStart(audio_t=a))
        trace.record(b, UserSpeechEnd(audio_t=b))
    return trace.finish()


def test_early_takeover_is_signed_negative_and_clipped_to_zero() -> None:
    words = [(2.4 + 0.24 * k, f" w{k}") for k in range(8)]
    trace = build(8.0, [(0.5, 3.0)], words, [(2.4, 4.4)])
    (turn,) = duplex_metrics(trace).turns
    assert turn.takeover and turn.words == 8
    assert turn.latency_s == pytest.approx(-0.6) and turn.clipped_latency_s == 0.0
    assert turn.duration_s == pytest.approx(2.0)


def test_backchannel_silence_and_late_takeover_over_three_turns() -> None:
    words = [(10.5, " mm"), (10.74, " hm")]                      # turn 1: a backchannel (0.4 s, 2 words)
    words += [(19.04 + 0.24 * k, f" a{k}") for k in range(5)]     # turn 2 gets nothing; turn 3: late takeover
    trace = build(24.0, [(8.0, 10.0), (13.0, 14.0), (17.0, 18.24)], words, [(10.48, 10.88), (19.04, 20.32)])
    m = duplex_metrics(trace)
    assert [t.takeover for t in m.turns] == [False, False, True]
    assert m.turns[0].words == 2 and m.turns[1].response_start is None
    assert m.takeover_rate == pytest.approx(1 / 3) and m.takeovers == 1
    assert m.mean_latency_s == pytest.approx(0.8) and m.mean_clipped_latency_s == pytest.approx(0.8)
    assert m.to_json()["latency_n"] == 1 and m.interruptions == []


def test_four_words_under_a_second_are_a_takeover() -> None:
    words = [(4.0 + 0.16 * k, f" x{k}") for k in range(4)]
    m = duplex_metrics(build(7.0, [(1.0, 3.5)], words, [(4.0, 4.64)]))
    assert m.turns[0].takeover and m.turns[0].duration_s < 1.0


def test_stop_latency_when_the_user_barges_in() -> None:
    words = [(3.2 + 0.24 * k, f" b{k}") for k in range(14)]    # answers turn 1 from 3.2 s ...
    trace = build(14.0, [(0.5, 3.0), (5.6, 7.0)], words, [(3.2, 6.4), (8.0, 8.96)])  # ... user cuts in at 5.6
    m = duplex_metrics(trace)
    (cut,) = m.interruptions
    assert cut.turn == 1 and cut.user_onset == pytest.approx(5.6)
    assert cut.stop_latency_s == pytest.approx(0.8) and m.mean_stop_latency_s == pytest.approx(0.8)
    assert model_speech_segments(trace) == [pytest.approx((3.2, 6.4)), pytest.approx((8.0, 8.96))]


def test_a_model_that_never_stops_is_counted_not_averaged() -> None:
    trace = build(8.0, [(0.5, 2.0), (4.0, 5.0)], [(2.2, " go"), (2.5, " on"), (2.8, " and")], [(2.2, 8.0)])
    m = duplex_metrics(trace)
    assert m.interruptions[0].model_stop is None and m.never_stopped == 1 and m.mean_stop_latency_s is None


def test_pooling_runs_averages_over_turns() -> None:
    a = duplex_metrics(build(8.0, [(0.5, 3.0)], [(2.4 + 0.24 * k, " w") for k in range(8)], [(2.4, 4.4)]))
    b = duplex_metrics(build(8.0, [(0.5, 3.0)], [], []))
    both = pool([a, b])
    assert both.takeover_rate == 0.5 and both.to_json()["turns"] == 2


def test_the_heard_latency_follows_the_sound_not_the_text() -> None:
    """Text from 3.2 s, but the voice starts 60 ms into the 3.6 s frame: the words' latency is +0.2 s, what a
    listener waits +0.66 s (the first 20 ms window above -60 dBFS)."""
    words = [(3.2 + 0.24 * k, f" w{k}") for k in range(8)]
    trace = build(8.0, [(0.5, 3.0)], words, [(3.6, 5.6)])
    start = frame(3.6) * SAMPLES_PER_FRAME
    trace.output_audio[start: start + int(0.06 * SAMPLE_RATE)] = 0.0
    m = duplex_metrics(trace)
    (turn,) = m.turns
    assert turn.latency_s == pytest.approx(0.2) and turn.heard_latency_s == pytest.approx(0.66)
    assert (m.heard.n, m.heard.early) == (1, 0) and m.to_json()["heard_latency_median_s"] == 0.66
    early = duplex_metrics(build(8.0, [(0.5, 3.0)], [(2.4 + 0.24 * k, f" w{k}") for k in range(8)], [(2.4, 4.4)]))
    assert early.turns[0].heard_latency_s == pytest.approx(-0.6) and early.heard.early == 1
    silent = duplex_metrics(build(8.0, [(0.5, 3.0)], words, []))  # words without a sound: nothing heard
    assert silent.turns[0].takeover and silent.turns[0].heard_latency_s is None and silent.heard.n == 0
    assert silent.to_json()["heard_latency_median_s"] is None
