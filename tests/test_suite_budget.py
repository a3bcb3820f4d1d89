"""The suite's own time budget (tests/conftest.py, issue 43): a test not marked ``slow`` whose call takes longer
than ``KAME_TEST_BUDGET_S`` fails and says why, counted in wall or CPU seconds (``KAME_TEST_BUDGET_CLOCK``); its
fixtures are not counted; a test marked ``slow`` is not held to it; a bad setting stops the run before any test.
Run on a made-up test file with the suite's conftest, in a pytest of its own."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

MADE_UP = '''
import time

import pytest


@pytest.fixture
def slow_setup():
    time.sleep(0.8)


def test_quick():
    pass


def test_sleeps_over_the_budget():
    time.sleep(0.8)


def test_computes_over_the_budget():
    start = time.process_time()
    while time.process_time() - start < 0.8:
        pass


def test_fixtures_are_not_counted(slow_setup):
    pass


@pytest.mark.slow
def test_marked_slow():
    time.sleep(0.8)


def test_failing_on_its_own():
    assert False, "its own failure"
'''


def _run(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(TESTS / "conftest.py", folder / "conftest.py")
    (folder / "test_made_up.py").write_text(MADE_UP)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-rf", str(folder)], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.parametrize("clock, over", [("wall", ["sleeps", "computes"]), ("cpu", ["computes"])])
def test_a_test_over_the_budget_fails_naming_it_the_budget_and_its_clock(tmp_path: Path, clock: str,
                                                                          over: list[str]) -> None:
    run = _run(tmp_path, KAME_TEST_BUDGET_S="0.5", KAME_TEST_BUDGET_CLOCK=clock)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert f"{len(over) + 1} failed, {6 - len(over) - 1} passed" in out, out
    for name in over:
        took = re.search(rf"test_made_up\.py::test_{name}_over_the_budget took ([0-9.]+) s \({clock}\), over the "
                         r"0\.5 s a test not marked slow", out)
        assert took and float(took.group(1)) >= 0.8, out
    assert "its own failure" in out  # a test's own failure is reported as it was
    fine = {"quick", "fixtures_are_not_counted", "marked_slow"} | ({"sleeps_over_the_budget"} - {f"{n}_over_the_budget"
                                                                                             for n in over})
    for name in fine:
        assert f"FAILED test_made_up.py::test_{name}" not in out, out


@pytest.mark.parametrize("setting", [{"KAME_TEST_BUDGET_S": "five"}, {"KAME_TEST_BUDGET_S": "nan"},
                                     {"KAME_TEST_BUDGET_S": "-1"}, {"KAME_TEST_BUDGET_CLOCK": "sundial"}])
def test_a_bad_budget_setting_is_refused_before_any_test_runs(tmp_path: Path, setting: dict[str, str]) -> None:
    run = _run(tmp_path, **setting)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "KAME_TEST_BUDGET_S=" in out and "0: no budget" in out, out
    assert "passed" not in out and "failed" not in out, out


def test_the_waiting_files_are_real_time_files_that_exist() -> None:
    """tests/suite.sh runs the files of WAITING_FILES beside the other real-time files: each must be one of them."""
    from tests.conftest import WAITING_FILES, WALL_CLOCK_FILES

    assert WAITING_FILES < WALL_CLOCK_FILES
    assert sorted(n for n in WALL_CLOCK_FILES if not (TESTS / n).is_file()) == []
