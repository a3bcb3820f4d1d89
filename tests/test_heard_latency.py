"""Turn latency by the audio (kame_core.analysis.heard) and beside the ASR's in Full-Duplex-Bench's scoring: the
case the benchmark's word timestamps hide (the first word stamped 0.34 s before any sound)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from kame_core.analysis.heard import WINDOW_S, HeardLatency, first_heard, first_quiet
from kame_core.analysis.metrics import SILENCE_RMS
from kame_core.clock import SAMPLE_RATE
from kame_core.eval import fdb


def _tone(seconds: float, rms: float, sr: int = SAMPLE_RATE) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (rms * np.sqrt(2) * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def _silence_then(start_s: float, tone_s: float, rms: float = 0.1, sr: int = SAMPLE_RATE) -> np.ndarray:
    return np.concatenate([np.zeros(int(round(start_s * sr)), np.float32), _tone(tone_s, rms, sr)])


def test_the_first_window_above_minus_60_dbfs_is_when_it_is_heard():
    audio = _silence_then(2.34, 0.5)
    assert first_heard(audio, SAMPLE_RATE) == pytest.approx(2.34)
    assert first_heard(audio, SAMPLE_RATE, from_s=2.5) == pytest.approx(2.5)  # from the window holding from_s
    assert first_heard(audio, SAMPLE_RATE, from_s=9.0) is None
    assert first_heard(audio, SAMPLE_RATE, until_s=2.34) is None  # no window starting before it is loud
    assert first_heard(audio, SAMPLE_RATE, until_s=2.35) == pytest.approx(2.34)
    assert first_heard(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE) is None
    # the level is the analysis' silence: just under it is not heard, just over it is
    assert first_heard(_silence_then(1.0, 0.2, rms=0.9 * SILENCE_RMS), SAMPLE_RATE) is None
    assert first_heard(_silence_then(1.0, 0.2, rms=1.2 * SILENCE_RMS), SAMPLE_RATE) == pytest.approx(1.0)
    # 20 ms resolution: a start inside a window is reported at that window's start
    assert first_heard(_silence_then(1.01, 0.2), SAMPLE_RATE) == pytest.approx(1.0)
    assert first_heard(_silence_then(1.0, 0.2, sr=16_000), 16_000) == pytest.approx(1.0)
    broken = np.zeros(SAMPLE_RATE, np.float32)
    broken[int(0.5 * SAMPLE_RATE)] = np.nan
    assert first_heard(broken, SAMPLE_RATE) == pytest.approx(0.5, abs=WINDOW_S)  # a NaN is not silence
    for bad in ({"sample_rate": 0}, {"sample_rate": SAMPLE_RATE, "window_s": 0.0},
                {"sample_rate": SAMPLE_RATE, "from_s": float("nan")},
                {"sample_rate": SAMPLE_RATE, "until_s": float("nan")}):
        with pytest.raises(ValueError, match="first_heard"):
            first_heard(audio, **bad)


def test_the_first_quiet_window_after_a_time_is_where_the_sound_stops():
    sr = 24_000
    audio = np.zeros(3 * sr, np.float32)
    audio[sr // 2: 2 * sr] = 0.1  # sound from 0.5 s to 2.0 s
    assert first_quiet(audio, sr) == 0.0
    assert first_quiet(audio, sr, from_s=0.7) == pytest.approx(2.0)
    assert first_heard(audio, sr, from_s=first_quiet(audio, sr, from_s=0.7)) is None  # nothing after it
    assert first_quiet(np.full(sr, 0.1, np.float32), sr) is None
    with pytest.raises(ValueError):
        first_quiet(audio, sr, from_s=float("nan"))


def test_heard_latencies_summarize_as_median_p10_p90_and_early_starts():
    summary = HeardLatency.of([0.33, -0.2, 0.5, 0.1, 0.7])
    assert (summary.n, summary.median_s, summary.early) == (5, pytest.approx(0.33), 1)
    assert summary.p10_s == pytest.approx(float(np.percentile([0.33, -0.2, 0.5, 0.1, 0.7], 10)))
    assert summary.cell().startswith("+0.330 s [p10 -0.080, p90 +0.620], 1 early (n=5)")
    assert HeardLatency.of([]).cell() == "—" and HeardLatency.of([]).to_json()["heard_latency_median_s"] is None


def _smooth_sample(root: Path, name: str, words: list[tuple[str, float, float]], output: np.ndarray | None,
                   end_s: float = 2.01) -> fdb.Sample:
    folder = root / "smooth" / name
    folder.mkdir(parents=True)
    (folder / "turn_taking.json").write_text(json.dumps([{"text": "[TURN-TAKING]", "timestamp": [end_s, 2.5]}]))
    (folder / fdb.OUTPUT_JSON).write_text(json.dumps(fdb.output_json(words, asr="hand-made", front_end="hand-made")))
    if output is not None:
        sf.write(str(folder / fdb.OUTPUT_WAV), output, 16_000, subtype="PCM_16")
    return fdb.Sample(folder)


def test_fdb_reports_the_heard_latency_beside_the_asr_figure_it_corrects(tmp_path):
    """The field case: the ASR stamps "I'm" at 2.00 s, the user ends at 2.01 s, the output is digital silence until
    2.34 s. The benchmark's latency reads 0.00 s (-0.01 clipped); a listener waits 0.33 s."""
    answer = [(w, 2.0 + 0.3 * i, 2.25 + 0.3 * i) for i, w in enumerate("I'm sure it is Paris".split())]
    artefact = fdb.score_sample(_smooth_sample(tmp_path, "artefact", answer, _silence_then(2.34, 2.0, sr=16_000)),
                                tmp_path)
    assert artefact.takeover and artefact.latency_s == pytest.approx(-0.01)
    assert artefact.heard_latency_s == pytest.approx(0.33)
    early_words = [(w, 1.5 + 0.3 * i, 1.75 + 0.3 * i) for i, w in enumerate("yes it is Paris".split())]
    early = fdb.score_sample(_smooth_sample(tmp_path, "early", early_words, _silence_then(1.5, 2.0, sr=16_000)),
                             tmp_path)
    assert early.heard_latency_s == pytest.approx(-0.51)
    unheard = fdb.score_sample(_smooth_sample(tmp_path, "no-wav", answer, None), tmp_path)
    assert unheard.takeover and unheard.heard_latency_s is None
    backchannel = fdb.score_sample(_smooth_sample(tmp_path, "mhm", [("mhm", 2.2, 2.4)],
                                                  _silence_then(2.2, 0.2, sr=16_000)), tmp_path)
    assert not backchannel.takeover and backchannel.heard_latency_s == pytest.approx(0.19)

    [summary] = fdb.summarize([artefact, early, unheard, backchannel])
    assert summary.latency_clipped_s == pytest.approx(0.0)  # (max(0, -0.01) + max(0, -0.51) + max(0, -0.01)) / 3
    heard = summary.heard  # over the takeover samples that have audio: the ASR figure's samples
    assert (heard.n, heard.early) == (2, 1) and heard.median_s == pytest.approx((0.33 - 0.51) / 2)
    assert heard.cell() in summary.line() and "heard latency" in fdb.TABLE_HEAD
    assert summary.line().count("|") == fdb.TABLE_HEAD.splitlines()[0].count("|")
    assert artefact.to_json()["heard_latency_s"] == 0.33
    rows = fdb.comparison_rows({"kame": [summary]})
    assert rows[0].count("|") == fdb.COMPARISON_HEAD.splitlines()[0].count("|")
    assert f"{heard.median_s:.3f} s" in rows[0] and all("| — | quoted" in row for row in rows[1:])


def test_a_broken_output_wav_is_refused_by_name(tmp_path):
    sample = _smooth_sample(tmp_path, "broken", [("paris", 2.2, 2.5)], None)
    (sample.folder / fdb.OUTPUT_WAV).write_bytes(b"RIFF not audio")
    with pytest.raises(fdb.FDBError, match="output.wav: not a readable audio file"):
        fdb.score_sample(sample, tmp_path)
