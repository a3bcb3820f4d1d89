"""benchmarks/gpu_step.py runs on CPU in tiny mode (what `make gpu-check` and CI run without a GPU)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu_step import main


@pytest.mark.slow  # runs the benchmark script
def test_gpu_step_benchmark_runs_tiny_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gpu_step.json"
    assert main(["--tiny", "--device", "cpu", "--batches", "1,2", "--frames", "3", "--warmup", "1",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tiny LM + narrow Mimi" in printed and "memory per added session: state" in printed
    table = [line for line in printed.splitlines() if line.strip()[:1].isdigit()]
    assert [int(line.split("|")[0]) for line in table] == [1, 2]
    result = json.loads(out.read_text())
    rows = {r["batch"]: r for r in result["rows"]}
    for row in rows.values():
        for loop in ("upstream", "kame", "pool"):
            timing = row[loop]["timing"]
            assert timing["samples"] == 3 and 0 < timing["median_ms"] <= timing["p99_ms"]
    # the streaming state (KV caches, Mimi buffers) grows by one session's worth per slot (plus a few
    # batch-independent bytes: initial tokens and the like)
    one, two = rows[1]["pool"]["state_bytes"], rows[2]["pool"]["state_bytes"]
    assert 0.99 * one <= two - one < one
    assert result["summary"]["per_added_session"]["state_mib"] == pytest.approx((two - one) / 2**20)
