"""The executor contract without Ray: the local executor's retries and outcomes, and clear option errors."""
from __future__ import annotations

import subprocess
import sys
from typing import NoReturn, cast

import pytest

from kame_core.executors import ExecutorUnavailable, LocalExecutor, make_executor


class FlakyWorker:
    """Fails the first ``fail_times`` calls for each item named 'flaky'; always fails on 'bad'."""

    def __init__(self, fail_times: int = 1) -> None:
        self.fail_times = fail_times
        self.seen: dict[str, int] = {}

    def __call__(self, item: str) -> str:
        self.seen[item] = self.seen.get(item, 0) + 1
        if item == "bad" or (item == "flaky" and self.seen[item] <= self.fail_times):
            raise RuntimeError(f"{item} failed")
        return item.upper()


def flaky_worker() -> FlakyWorker:
    return FlakyWorker()


@pytest.mark.parametrize("workers", [1, 2])
def test_local_executor_retries_then_reports(workers: int) -> None:
    outcomes = list(LocalExecutor(workers=workers, batch_size=2, retries=1).map(flaky_worker,
                                                                                 ["a", "flaky", "bad", "b"]))
    by_item = {o.item: o for o in outcomes}
    assert sorted(o.index for o in outcomes) == [0, 1, 2, 3]
    assert (by_item["a"].value, by_item["a"].attempts) == ("A", 1)
    assert (by_item["flaky"].value, by_item["flaky"].attempts) == ("FLAKY", 2)
    assert (by_item["bad"].error, by_item["bad"].attempts, by_item["bad"].ok) == ("RuntimeError: bad failed", 2,
                                                                                  False)


def test_local_executor_builds_no_worker_without_items() -> None:
    def refuse() -> NoReturn:
        raise AssertionError("no worker should be built")

    assert list(LocalExecutor().map(refuse, [])) == []


def test_executor_option_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExecutorUnavailable, match="unknown executor 'spark'"):
        make_executor("spark")
    with pytest.raises(ExecutorUnavailable, match="--ray-address needs --executor ray"):
        make_executor("local", ray_address="auto")
    monkeypatch.setattr("kame_core.executors.factory.ray_available", lambda: False)
    with pytest.raises(ExecutorUnavailable, match="requirements-ray.txt"):
        make_executor("ray")


def test_importing_kame_core_does_not_import_ray() -> None:
    code = ("import sys, kame_core, kame_core.executors, kame_core.augment.cli, kame_core.eval.cli; "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_local_threads_share_one_worker_and_run_items_at_once() -> None:
    import threading

    built: list[object] = []
    barrier = threading.Barrier(3, timeout=10)

    class Meeting:
        """Each item waits until three are in flight together: only concurrent threads get through."""

        def __init__(self) -> None:
            built.append(self)

        def __call__(self, item: int) -> int:
            if item == 4:
                raise ValueError("bad item")
            if item < 3:
                barrier.wait()
            return item * 10

    outcomes = list(make_executor("local", threads=3, retries=0).map(Meeting, list(range(5))))
    assert len(built) == 1
    assert sorted(cast(int, o.value) for o in outcomes if o.ok) == [0, 10, 20, 30]  # ok: the value is set
    assert [o.error for o in outcomes if not o.ok] == ["ValueError: bad item"]
    with pytest.raises(ExecutorUnavailable, match="workers = 1"):
        make_executor("local", workers=2, threads=2)
