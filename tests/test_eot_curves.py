"""``python -m kame_core.eval eot`` (issue 45): each floor policy's threshold swept on a Full-Duplex-Bench-layout set,
scored as eot-bench scores detectors -- false cut-offs within a latency budget, latency within a cut-off budget --
with VAD alone as the baseline."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from kame_core.eval import fdb
from kame_core.eval.cli import main
from kame_core.eval.eot import FUSED_GRID, CurvePoint, Replay, budgets, front, point, settings
from kame_core.turns.end_of_turn import EndOfTurnConfig
from kame_core.turns.floor_policies import FusedConfig

F = 0.08


def replay(task: str, annotation: tuple[float, float], frames: int, speech: list[tuple[float, float]],
           p_end: float = 0.0) -> Replay:
    """An input whose user speaks in ``speech`` (seconds), the words' end-of-turn probability ``p_end`` once any
    word is heard, no sound score."""
    times = [(i + 1) * F for i in range(frames)]
    speaking = [any(a <= t < b for a, b in speech) for t in times]
    silence: list[float | None] = []
    for t, s in zip(times, speaking):
        ended = [b for a, b in speech if b <= t]
        silence.append(None if s or not ended else t - max(ended))
    return Replay(task, annotation, speaking, silence, [p_end if any(a <= t for a, _ in speech) else 0.0
                                                        for t in times],
                  [False] * frames, [""] * frames, [math.nan] * frames)


def test_a_setting_counts_cut_offs_at_mid_turn_pauses_and_latency_after_the_end() -> None:
    pause = replay("pause_handling", (1.0, 2.0), 50, [(0.2, 1.0), (2.0, 3.0)])  # a 1 s pause mid-question
    done = replay("smooth_turn_taking", (2.0, 4.0), 50, [(0.2, 2.0)])  # the question ends at 2.0 s
    vad = dict((round(v, 2), c) for _, v, c in settings("vad"))
    short = point([pause, done], "vad", "any_turn_s", 0.4, vad[0.4])
    assert short.false_cutoff_rate == 0.5 and short.cutoff_items == 2  # the pause is cut into, the question is not
    assert short.latency_median_s == pytest.approx(0.4, abs=F) and short.turn_ends == 1
    long = point([pause, done], "vad", "any_turn_s", 1.2, vad[1.2])
    assert long.false_cutoff_rate == 0.0 and long.latency_median_s == pytest.approx(1.2, abs=F)
    # the gate's words give it at once where the text says the turn is over; below its threshold, silence decides
    sure = replay("smooth_turn_taking", (2.0, 4.0), 50, [(0.2, 2.0)], p_end=0.5)
    eager = point([sure], "gate", "complete_p", 0.1, EndOfTurnConfig(complete_p=0.1, after_complete_s=0.0))
    assert eager.latency_median_s <= F + 1e-9
    never = replay("smooth_turn_taking", (2.0, 4.0), 30, [(0.2, 2.0)])  # ends 0.4 s after the question
    assert math.isinf(point([never], "vad", "any_turn_s", 1.2, vad[1.2]).latency_median_s)


def test_the_budgets_take_the_best_setting_within_each_limit() -> None:
    def p(rate: float | None, latency: float) -> CurvePoint:
        return CurvePoint("x", "t", 0.0, None, rate, 10, latency, latency, 10)

    curve = [p(0.30, 0.2), p(0.12, 0.3), p(0.08, 0.5), p(0.04, 0.9), p(0.0, math.inf), p(None, 0.1)]
    assert budgets(curve) == {"false_cutoffs_at_300ms": 0.12, "false_cutoffs_at_600ms": 0.08,
                              "latency_at_5pct_cutoffs_s": 0.9, "latency_at_10pct_cutoffs_s": 0.5}
    assert budgets([p(0.5, 2.0)]) == {"false_cutoffs_at_300ms": None, "false_cutoffs_at_600ms": None,
                                      "latency_at_5pct_cutoffs_s": None, "latency_at_10pct_cutoffs_s": None}


def test_the_curve_keeps_the_settings_nothing_beats_on_both_measures() -> None:
    def p(rate: float | None, latency: float) -> CurvePoint:
        return CurvePoint("x", "t", latency, None, rate, 10, latency, latency, 10)

    faster_worse, beaten, tie_worse, slower_better = p(0.3, 0.1), p(0.3, 0.2), p(0.4, 0.1), p(0.0, 0.5)
    assert front([beaten, slower_better, tie_worse, faster_worse]) == [faster_worse, slower_better]
    assert front([]) == []


def test_every_policy_sweeps_its_threshold_and_an_unknown_one_is_refused() -> None:
    for policy, threshold in (("gate", "complete_p"), ("smart-turn", "complete_p"), ("vad", "any_turn_s")):
        swept = settings(policy)
        assert len(swept) >= 10 and {name for name, _, _ in swept} == {threshold}
        values = [v for _, v, _ in swept]
        assert values == sorted(values) and len(set(values)) == len(values)
    grid = settings("fused")  # both thresholds on a grid, the floor's own setting among them
    assert {name for name, _, _ in grid} == {FUSED_GRID} and FusedConfig() in {c for _, _, c in grid}
    assert len({(c.text_p, c.audio_p) for _, _, c in grid}) == len(grid) >= 100
    with pytest.raises(ValueError, match="choose from gate, smart-turn, fused, vad"):
        settings("model")


@pytest.mark.parametrize("args,says", [
    (["--floor", "model"], "--floor: model: choose from"), (["--floor", ","], "--floor: none given"),
    (["--half", "held_out"], "no such folder")])
def test_the_command_refuses_in_one_line(tmp_path: Path, capsys, args: list[str], says: str) -> None:
    assert main(["eot", "--set", str(tmp_path / "absent"), "--out", str(tmp_path / "o"), *args]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_writes_the_curve_and_the_budgets_of_a_synthetic_set(tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    """Real speech (Piper), the real streaming STT, SmolLM2 and Smart Turn, one input of each kind per half."""
    assert main(["fdb-synth", "--out", str(tmp_path / "set"), "--limit", "1"]) == 0
    out = tmp_path / "out"
    assert main(["eot", "--set", str(tmp_path / "set"), "--half", "all", "--floor", "gate,vad",
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "| gate |" in said and "| vad |" in said and "mid-question pauses" in said
    with open(out / "eot_curve.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["policy"] for r in rows} == {"gate", "vad"}
    assert len(rows) == len(settings("gate")) + len(settings("vad"))
    found = [s for half in ("tuning", "held_out") if (tmp_path / "set" / half).is_dir()
             for s in fdb.find_samples(tmp_path / "set" / half)]
    pauses, questions = (sum(s.task == task for s in found) for task in ("pause_handling", "smooth_turn_taking"))
    assert pauses >= 1 and questions >= 1
    assert all(r["cutoff_items"] == str(pauses + questions) and r["turn_ends"] == str(questions) for r in rows)
    vad = [r for r in rows if r["policy"] == "vad"]
    first, last = float(vad[0]["false_cutoff_rate"]), float(vad[-1]["false_cutoff_rate"])
    assert first >= last  # waiting longer never cuts off more
    with open(out / "eot_budgets.csv", newline="", encoding="utf-8") as f:
        assert [r["policy"] for r in csv.DictReader(f)] == ["gate", "vad"]
    assert (out / "eot_curve.html").is_file() and (out / "eot_curve.json").is_file()
    assert "latency at 5 % cut-offs" in (out / "eot_budgets.md").read_text(encoding="utf-8")
    import errno

    from kame_core.eval import eot

    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(eot, "write_bytes_atomic", full_disk)  # the table is printed, the files refused in a line
    code = main(["eot", "--set", str(tmp_path / "set"), "--half", "all", "--floor", "vad",
                 "--out", str(tmp_path / "o")])
    refused = capsys.readouterr()
    assert code == 2 and "cannot write the curves (No space left on device)" in refused.err
    assert "| vad |" in refused.out
