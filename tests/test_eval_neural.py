"""``python -m kame_core.eval mtbench --weights TINY --device cpu``: the evaluation on a neural checkpoint, its
sessions concurrent on one session pool (the tiny random checkpoint: a plumbing check, scores are noise)."""
from __future__ import annotations

import json

import pytest

from kame_core.eval.cli import EXIT_BAD_INPUT, main
from kame_core.neural.choice import ORACLE_OFF_LABEL
from kame_core.neural.tiny import TINY_LABEL, write_tiny_checkpoint

from .shared_data import MT_BENCH, needs_mt_bench


def _args(out, *extra: str) -> list[str]:
    return ["mtbench", "--data", str(MT_BENCH), "--out", str(out), "--questions", "152", "--seeds", "1",
            "--judge", "none", "--delays", "0", "--no-progress", *extra]


@needs_mt_bench
def test_a_folder_without_a_checkpoint_stops_before_any_session(tmp_path, capsys):
    assert main(_args(tmp_path / "out", "--weights", str(tmp_path), "--device", "cpu")) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "checkpoint unavailable" in err and "model.safetensors" in err
    assert not (tmp_path / "out" / "cache.jsonl").exists() or not (tmp_path / "out" / "cache.jsonl").read_text()


@needs_mt_bench
def test_a_missing_checkpoint_stops_a_local_ray_run_before_ray_starts(tmp_path, capsys):
    code = main(_args(tmp_path / "out", "--weights", str(tmp_path), "--executor", "ray"))
    assert code == EXIT_BAD_INPUT and "checkpoint unavailable" in capsys.readouterr().err  # runs: test_eval_ray_neural


@needs_mt_bench
@pytest.mark.slow
def test_one_question_on_the_tiny_checkpoint_in_kame_and_moshi_mode(tmp_path):
    tiny = write_tiny_checkpoint(tmp_path / "tiny")
    out = tmp_path / "run"
    assert main(_args(out, "--modes", "kame,moshi", "--weights", str(tiny), "--device", "cpu",
                      "--pool-size", "2", "--max-wait", "2")) == 0  # the random model may never go quiet: 2 s
    table = (out / "table2.md").read_text()
    assert TINY_LABEL in table and "on cpu" in table and str(tiny) in table and ORACLE_OFF_LABEL in table
    assert "2 at a time" in table
    rows = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert {r["system"] for r in rows} >= {"kame", "moshi"}
    sessions = [json.loads(line) for line in (out / "cache.jsonl").read_text().splitlines()]
    results = [s["value"] for s in sessions if s.get("kind") == "session"]
    assert len(results) == 2
    for result in results:
        assert result["provenance"]["front_end"].startswith("neural-random")
        assert result["llm_requests"] > 0 or result["mode"] == "moshi"
