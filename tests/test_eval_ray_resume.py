"""An MT-Bench run's cache is shared by the executors: a session run on a Ray actor (real Piper, Whisper and
SmolLM2, loaded once in the actor) is reused by the local executor without recomputing, and a Ray run over a
cache that holds everything starts no Ray at all. One question, one mode: a session costs about a minute.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kame_core.eval import harness
from kame_core.eval.cli import main
from kame_core.executors import ray_available

from .shared_data import MT_BENCH, needs_mt_bench
from .test_eval_e2e import CountingRunner, read_turns

pytestmark = [needs_mt_bench, pytest.mark.slow,
              pytest.mark.skipif(not ray_available(), reason="Ray is not installed "
                                 "(pip install -c constraints.txt -r requirements-ray.txt)")]


def args(out: Path, *extra: str) -> list[str]:
    return ["mtbench", "--data", str(MT_BENCH), "--out", str(out), "--modes", "cascade", "--questions", "152",
            "--seeds", "1", "--judge", "none", "--delays", "0", "--no-progress", *extra]


def test_an_eval_resumed_with_the_other_executor_reuses_the_cache(tmp_path: Path, capsys) -> None:
    import ray

    out = tmp_path / "run"
    try:
        assert main(args(out, "--executor", "ray", "--workers", "1")) == 0
    finally:
        if ray.is_initialized():
            ray.shutdown()
    printed = capsys.readouterr().out
    assert "sessions: 1 run, 0 from the cache (ray executor)" in printed
    assert "Components (from the cached traces)" in printed  # the driver loaded no stack
    cache_lines = (out / "cache.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in cache_lines].count("session") == 1  # written once, by the driver
    ray_turns = read_turns(out)
    assert len(ray_turns) == 2 and all(t["answer"].strip() for t in ray_turns)

    local = CountingRunner()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "run_session", local)
        assert main(args(out)) == 0
    assert local.calls == 0 and "sessions: 0 run, 1 from the cache (local executor)" in capsys.readouterr().out
    assert read_turns(out) == ray_turns

    assert main(args(out, "--executor", "ray")) == 0
    assert "sessions: 0 run, 1 from the cache (ray executor)" in capsys.readouterr().out
    assert not ray.is_initialized()  # nothing to run: no Ray was started
    assert read_turns(out) == ray_turns
    assert (out / "cache.jsonl").read_text().splitlines()[:len(cache_lines)] == cache_lines
