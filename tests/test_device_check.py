"""The GPU check's CPU rehearsal: the one command a lent GPU runs, on the tiny LM, so it cannot rot unseen."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a few small processes, about a minute


def test_the_device_check_rehearses_on_cpu(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.device.check", "--device", "cpu", "--tiny",
                           "--out", str(tmp_path), "--budget-s", "480"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "device_check.json").read_text())
    assert report["environment"]["torch"] and report["weights"].startswith("random")
    stages = report["stages"]
    assert list(stages) == ["cuda_tests", "sessions_bf16", "sessions_fp8", "kv_growth", "live_server", "door_pump"]
    assert all(stage["status"] == "ok" for stage in stages.values())
    assert stages["cuda_tests"]["results"]["tests"] >= 1 and not stages["cuda_tests"]["results"]["failed"]
    for name in ("sessions_bf16", "sessions_fp8", "kv_growth"):
        rows = stages[name]["results"]["rows"]
        assert [r["batch"] for r in rows] == [1, 2] and all(r["median_ms"] > 0 for r in rows)
    fp8 = stages["sessions_fp8"]["results"]["rows"][0]["state_gib_per_session"]
    bf16 = stages["sessions_bf16"]["results"]["rows"][0]["state_gib_per_session"]
    assert fp8 < bf16  # the fp8 cache holds a session in less memory (fp32 model on CPU: about a quarter)
    assert stages["kv_growth"]["results"]["kv"] == {"dtype": "", "grow_frames": 2}
    live = stages["live_server"]["results"]
    assert "random weights" in live["front_end"] and "scripted STT" in live["doubles"]
    assert [r["n"] for r in live["rounds"]] == [1, 2] and all(r["frames"] > 0 for r in live["rounds"])
    pump = stages["door_pump"]["results"]
    assert [r["sessions"] for r in pump["rows"]] == [4] and pump["rows"][0]["lost"] == {"direct": 0, "door": 0}
    assert pump["rows"][0]["door_cpu_ms_per_session_s"] > 0


def test_live_server_variants_are_checked_before_any_model_loads() -> None:
    from benchmarks.device.live_server import parse_variants

    assert parse_variants("") == [{}]
    assert parse_variants("gather_s=0.03;torch_threads=1, switch_ms=1;pcm=1") == [
        {"gather_s": 0.03}, {"torch_threads": 1.0, "switch_ms": 1.0}, {"pcm": 1.0}]
    for bad in ("gather_s=abc", "nope=1", "torch_threads=0", "torch_threads=inf", "torch_threads=1.5",
                "switch_ms=nan", "gather_s=1e308", "gather_s", "pcm=0.5", "pcm=2"):
        with pytest.raises(ValueError, match="expected one of pcm, gather_s"):
            parse_variants(bad)
