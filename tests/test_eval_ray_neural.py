"""The neural eval on Ray: ``mtbench --executor ray --workers 2 --weights TINY --device cpu`` runs its sessions on
two CPU actors, each with its own session pools; the report names both actors' devices and their sessions, and a
greedy session equals the one the local executor runs. The executor itself: an actor runs up to its concurrency
at once and says where it ran; an actor whose models cannot load stops the run naming it; one actor per GPU on
a machine without GPUs is refused.

Skipped when Ray is not installed (``pip install -c constraints.txt -r requirements-ray.txt``). The tiny
checkpoint has random weights: only the plumbing is checked, never what it says.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kame_core.eval.cli import main
from kame_core.executors import ExecutorError, ray_available
from kame_core.neural.tiny import TINY_LABEL, write_tiny_checkpoint

from .shared_data import MT_BENCH, needs_mt_bench

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not ray_available(), reason="Ray is not installed "
                                 "(pip install -c constraints.txt -r requirements-ray.txt)")]


@pytest.fixture(autouse=True)
def no_ray_left_behind():
    yield
    import ray

    if ray.is_initialized():  # a failed test must not leave a Ray running for the next one
        ray.shutdown()


def greedy_moshi_baseline(folder: Path) -> Path:
    """A tiny Moshi-baseline checkpoint that decodes greedily (its ``lm_gen_config``): reproducible anywhere."""
    write_tiny_checkpoint(folder, oracle=False)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "lm_gen_config": {"use_sampling": False}}))
    return folder


def args(out: Path, *extra: str) -> list[str]:
    return ["mtbench", "--data", str(MT_BENCH), "--out", str(out), "--questions", "116", "--seeds", "1",
            "--judge", "none", "--delays", "0", "--no-progress", "--device", "cpu", "--pool-size", "1",
            "--max-wait", "2", *extra]  # the shortest question; the random model may never go quiet: 2 s


def sessions(out: Path) -> dict[str, dict[str, Any]]:
    """The cached session results of a run, by mode."""
    rows = [json.loads(line) for line in (out / "cache.jsonl").read_text().splitlines()]
    return {r["value"]["mode"]: r["value"] for r in rows if r.get("kind") == "session"}


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its bookkeeping (compute time, where it ran)."""
    return {k: v for k, v in result.items() if k not in ("compute_s", "ran_on")}


@needs_mt_bench
def test_two_cpu_actors_run_the_sessions_and_the_report_names_both(tmp_path: Path, capsys) -> None:
    import ray

    tiny = write_tiny_checkpoint(tmp_path / "tiny")
    moshi = greedy_moshi_baseline(tmp_path / "moshi")
    weights = ["--weights", str(tiny), "--moshi-weights", str(moshi)]
    out = tmp_path / "ray"
    assert main(args(out, "--modes", "kame,moshi", *weights, "--executor", "ray", "--workers", "2")) == 0
    assert not ray.is_initialized()  # the executor started a local Ray and shut it down
    assert "sessions: 2 run, 0 from the cache (ray executor)" in capsys.readouterr().out
    on_ray = sessions(out)
    assert set(on_ray) == {"kame", "moshi"}
    # one session per actor (one slot each): both actors ran one, each on the CPU, and said so
    places = sorted(r["ran_on"] for r in on_ray.values())
    assert places[0].startswith("actor 0: cpu on node ") and places[1].startswith("actor 1: cpu on node ")
    assert on_ray["kame"]["provenance"]["front_end"].startswith("neural-random")
    assert on_ray["kame"]["llm_requests"] > 0
    table = (out / "table2.md").read_text()
    assert f"neural {tiny} + moshi {moshi}, on Ray actors" in table and TINY_LABEL in table
    assert "the sessions ran on 2 worker(s)" in table
    for mode, result in on_ray.items():
        assert f"{result['ran_on']}: 116 {mode} seed 0" in table

    local = tmp_path / "local"
    assert main(args(local, "--modes", "moshi", *weights)) == 0
    assert "sessions: 1 run, 0 from the cache (local executor)" in capsys.readouterr().out
    here = sessions(local)["moshi"]
    assert here["ran_on"] == "" and "Devices:" not in (local / "table2.md").read_text()
    assert comparable(here) == comparable(on_ray["moshi"])  # greedy: the same session wherever it runs


class Overlap:
    """A thread-safe worker: each item returns how many items it was running at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live = 0

    def __call__(self, item: int) -> int:
        with self._lock:
            self._live += 1
            peak = self._live
        time.sleep(0.5)
        with self._lock:
            peak, self._live = max(peak, self._live), self._live - 1
        return peak

    def where(self) -> str:
        return "test device"


def weights_missing() -> Overlap:
    raise RuntimeError("checkpoint unavailable: model.safetensors is not on this node")


def test_actors_run_their_concurrency_at_once_name_where_and_fail_by_name() -> None:
    import ray

    from kame_core.executors.ray_executor import LOCAL_RAY_SYSTEM_CONFIG, RayExecutor

    executor = RayExecutor(workers=1, retries=0, in_flight=1, concurrency=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env=executor._runtime_env(),  # one Ray for the three runs below (the executor keeps it)
             _system_config=dict(LOCAL_RAY_SYSTEM_CONFIG))
    outcomes = list(executor.map(Overlap, list(range(4))))
    assert sorted(o.index for o in outcomes) == [0, 1, 2, 3] and all(o.ok for o in outcomes)
    assert max(o.value or 0 for o in outcomes) == 2  # two items at once on the one actor
    assert all(o.worker.startswith("actor 0: test device on node ") for o in outcomes)

    with pytest.raises(ExecutorError, match=r"Ray actor 0 on node .* could not start: RuntimeError: checkpoint "
                                            "unavailable: model.safetensors is not on this node"):
        list(RayExecutor(workers=2).map(weights_missing, [0, 1]))

    with pytest.raises(ExecutorError, match="one Ray actor per GPU, but the Ray cluster has no GPU"):
        list(RayExecutor(workers=0, gpus_per_worker=1).map(Overlap, [0]))
    with pytest.raises(ExecutorError, match="need 2 GPU"):
        list(RayExecutor(workers=2, gpus_per_worker=1).map(Overlap, [0, 1]))
    assert ray.is_initialized()  # not started by the executors: left as it was
