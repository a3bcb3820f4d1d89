"""The Ray executor on a local Ray with 2 CPUs: the dataset built on Ray is byte-identical to the local build;
a worker killed mid-run is replaced and the run completes with nothing duplicated or missing.

Skipped when Ray is not installed (``pip install -c constraints.txt -r requirements-ray.txt``). Each test
starts its own local Ray (2 CPUs) through the executor, which shuts it down again.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from kame_core.augment.cli import main as augment_main
from kame_core.augment.simulators import OfflineSimulator
from kame_core.augment.spoken_dataset import BuildConfig, build_dataset, load_qa_pairs
from kame_core.executors import ExecutorError, ray_available
from kame_core.testing.qa import write_qa

from .test_augment_dataset import FakeTTS, fake_tts

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not ray_available(), reason="Ray is not installed "
                                 "(pip install -c constraints.txt -r requirements-ray.txt)")]

ITEMS = [{"id": f"r{i}", "question": f"question number {i} about the night train to vienna",
          "answer": f"the night train number {i} leaves at ten and arrives at seven"} for i in range(4)]


@pytest.fixture(autouse=True)
def no_ray_left_behind():
    yield
    import ray

    if ray.is_initialized():  # a failed test must not leave a Ray running for the next one
        ray.shutdown()


class CrashOnceTTS(FakeTTS):
    """The first synthesis anywhere (first to create ``marker``) kills its worker process with ``os._exit``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def synthesize(self, text: str):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return super().synthesize(text)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(1)


def crash_once_tts(marker: str) -> CrashOnceTTS:
    return CrashOnceTTS(marker)


def failing_factory() -> FakeTTS:
    raise RuntimeError("no voice here")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_ray_build_is_byte_identical_to_the_local_build(tmp_path: Path, capsys) -> None:
    qa = write_qa(tmp_path / "qa.jsonl", ITEMS + [{"id": "bad", "question": "please explode", "answer": "no"}])
    common = ["dataset", "--qa", str(qa), "--tts", "tests.test_augment_dataset:fake_tts", "--interval", "0.5"]
    assert augment_main([*common, "--out-dir", str(tmp_path / "local"), "--workers", "1"]) == 1  # 'bad' failed
    local_err = capsys.readouterr().err
    assert augment_main([*common, "--out-dir", str(tmp_path / "ray"), "--executor", "ray", "--workers", "2",
                         "--retries", "2"]) == 1
    ray_err = capsys.readouterr().err
    assert "built 4 dialogues" in local_err and "built 4 dialogues" in ray_err and "ray executor" in ray_err
    # the bad item is listed at the end, after its bounded retries, by both executors
    assert "failed bad: RuntimeError: synthesis failed" in local_err
    assert "failed bad: RuntimeError: synthesis failed" in ray_err
    local, ray_tree = tree(tmp_path / "local"), tree(tmp_path / "ray")
    assert len(local) == 12 and local == ray_tree  # 4 dialogues x (wav, text, oracle_raw), byte for byte
    import ray

    assert not ray.is_initialized()  # the executor started a local Ray and shut it down


def test_a_killed_worker_is_replaced_and_nothing_is_lost_or_duplicated(tmp_path: Path) -> None:
    from kame_core.executors.ray_executor import RayExecutor

    items = ITEMS + [{"id": f"x{i}", "question": f"is train {i} late", "answer": "no it is on time"}
                     for i in range(4)]
    pairs = load_qa_pairs(write_qa(tmp_path / "qa.jsonl", items))
    marker = tmp_path / "killed.pid"
    crashing = BuildConfig(tmp_path / "ray", functools.partial(crash_once_tts, str(marker)), OfflineSimulator,
                           interval=0.5)
    executor = RayExecutor(workers=2, retries=1)
    seen: list[int] = []
    real_map = executor.map

    def recording_map(factory, todo):  # every outcome the driver receives
        for outcome in real_map(factory, todo):
            seen.append(outcome.index)
            yield outcome

    executor.map = recording_map  # type: ignore[method-assign]  # a spy on this instance's map, on purpose
    summary = build_dataset(pairs, crashing, executor=executor, progress=False)
    assert marker.is_file() and int(marker.read_text()) != os.getpid()  # a Ray worker process did die
    assert executor.replaced_workers == 1 and summary.retried >= 1
    assert (summary.built, summary.failures) == (8, [])
    assert sorted(seen) == list(range(8))  # one outcome per dialogue: none duplicated, none missing
    reference = BuildConfig(tmp_path / "local", fake_tts, OfflineSimulator, interval=0.5)
    assert build_dataset(pairs, reference, workers=1, progress=False).built == 8
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")
    assert not list((tmp_path / "ray").rglob("*.tmp"))


def test_a_worker_that_cannot_start_stops_the_run_with_its_reason(tmp_path: Path) -> None:
    from kame_core.executors.ray_executor import RayExecutor

    pairs = load_qa_pairs(write_qa(tmp_path / "qa.jsonl", ITEMS[:2]))
    config = BuildConfig(tmp_path / "out", failing_factory, OfflineSimulator, interval=0.5)
    with pytest.raises(ExecutorError, match="could not start: RuntimeError: no voice here"):
        build_dataset(pairs, config, executor=RayExecutor(workers=2), progress=False)
    assert not (tmp_path / "out").exists()
