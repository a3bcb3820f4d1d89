"""Suite-wide settings: offline hub, no Gradio analytics, the ``slow`` mark (``make test-fast`` skips it), and the
groups that let the suite run in parallel (pytest-xdist, ``--dist loadgroup``; docs/testing.md).

Shared data paths and their skip marks are in :mod:`tests.shared_data`."""
from __future__ import annotations

import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # each parallel worker its share of the cores for torch's (and OpenMP's) threads, set before torch loads: two
    # workers' thread pools spinning on 2 cores made a 5 s file take 270 s
    _share = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, str(_share))

#: the xdist group of the tests that need the wall clock to themselves: run one at a time, on one worker
WALL_CLOCK_GROUP = "wall-clock"
#: test files whose tests hold real-time deadlines (a live server or session on the wall clock, a browser playing
#: audio, a worker's deadlines waited out): two of them never run at once, so a missed frame is the code's --
#: except one of :data:`WAITING_FILES` beside one of the others (tests/suite.sh)
WALL_CLOCK_FILES = frozenset({
    # headless Chromium: pages that play audio and redraw on the page's own clock
    "test_app_panels_browser.py", "test_app_server.py", "test_talk_browser.py", "test_talk_page.py",
    "test_timeline_browser.py", "test_timeline_interaction_browser.py",
    # live servers and sessions on the real-time clock
    "test_live_protocol.py", "test_live_limits.py", "test_live_session.py", "test_journal.py", "test_mic.py",
    "test_neural_serve.py", "test_server_faults.py", "test_fdb.py", "test_http_timeouts.py", "test_first_caller.py",
    "test_session_memory.py", "test_app_replicas.py", "test_serve_autoscale.py", "test_serve_replicas.py",
    # deadlines of the oracle worker, measured in seconds; the suite's own time budget
    "test_llm_process_watchdog.py", "test_suite_budget.py",
})
#: the files of :data:`WALL_CLOCK_FILES` that mostly wait out timeouts and faults, with little CPU of their own at
#: normal priority (alone on 2 cores the machine was 1-10 % busy during them): marked ``wall_clock_waits`` too, they
#: run one at a time beside the other real-time files, and take from them only the little CPU they use. (The oracle
#: watchdog's tests are not among them: beside the browser tests their nice-10 children answered late, twice in six
#: runs.)
WAITING_FILES = frozenset({
    "test_server_faults.py", "test_live_limits.py", "test_http_timeouts.py", "test_live_session.py",
    "test_session_memory.py",
})


def pytest_configure(config) -> None:
    config.stash[_BUDGET] = _budget()  # a bad setting stops the run here, before any test
    config.addinivalue_line("markers", "wall_clock: holds real-time deadlines (the files of WALL_CLOCK_FILES): make "
                                       "test runs these one at a time at normal priority, the others beside them at "
                                       "idle priority (tests/suite.sh)")
    config.addinivalue_line("markers", "wall_clock_waits: of the wall_clock files, those that mostly wait (the files "
                                       "of WAITING_FILES): make test runs these one at a time beside the other "
                                       "wall_clock files, both at normal priority (tests/suite.sh)")
    config.addinivalue_line("markers", "slow: loads Whisper, SmolLM2, Piper, the embeddings or a browser; runs a "
                                       "benchmark, a subprocess app, the real-time clock or seconds of a neural model "
                                       "(skipped by make test-fast)")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook names each test by its group)
def pytest_collection_modifyitems(config, items) -> None:
    """Every test gets an xdist group: :data:`WALL_CLOCK_GROUP` for the files of :data:`WALL_CLOCK_FILES`, which
    are also marked ``wall_clock`` (those of :data:`WAITING_FILES` ``wall_clock_waits`` too), else its own file (a
    module's fixtures, an app or a model loaded once, are then set up on one worker only)."""
    for item in items:
        name = item.path.name
        if name in WALL_CLOCK_FILES:
            item.add_marker(pytest.mark.wall_clock)
        if name in WAITING_FILES:
            item.add_marker(pytest.mark.wall_clock_waits)
        item.add_marker(pytest.mark.xdist_group(WALL_CLOCK_GROUP if name in WALL_CLOCK_FILES else name))


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and of its children it has waited for."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``KAME_TEST_CPU_LOG`` set to a file: one line per test, tab-separated -- its id, wall seconds, CPU
    seconds of this process and its waited-for children, and busy CPU seconds of the whole machine (docs/testing.md:
    what the suite's time is spent on)."""
    log = os.environ.get("KAME_TEST_CPU_LOG")
    if not log:
        yield
        return
    import time

    wall, own, busy = time.monotonic(), _own_cpu_s(), _machine_busy_s()
    yield
    row = (item.nodeid, time.monotonic() - wall, _own_cpu_s() - own, _machine_busy_s() - busy)
    with open(log, "a") as out:
        out.write("\t".join([row[0]] + [f"{v:.2f}" for v in row[1:]]) + "\n")


#: seconds a test not marked ``slow`` may take (its call, not its fixtures), else it fails: the edit loop stays
#: short (issue 43). ``KAME_TEST_BUDGET_S`` sets it; 0 turns the check off.
TEST_BUDGET_S = 5.0
#: what the budget counts (``KAME_TEST_BUDGET_CLOCK``): ``wall`` seconds, or ``cpu`` seconds of this process and the
#: children it waited for -- tests/suite.sh counts CPU where it runs tests at idle priority beside the real-time
#: ones: there, a test's wall time is mostly the time it was held off the CPU, and those tests wait on no clock
BUDGET_CLOCKS = ("wall", "cpu")


def _budget() -> tuple[float, str]:
    """(seconds, clock) of the budget, from the environment; a bad value is a usage error."""
    seconds, clock = os.environ.get("KAME_TEST_BUDGET_S") or str(TEST_BUDGET_S), os.environ.get(
        "KAME_TEST_BUDGET_CLOCK") or "wall"
    try:
        budget = float(seconds)
    except ValueError:
        budget = math.nan
    if not 0 <= budget < math.inf or clock not in BUDGET_CLOCKS:
        raise pytest.UsageError(f"KAME_TEST_BUDGET_S={seconds!r} KAME_TEST_BUDGET_CLOCK={clock!r}: seconds >= 0 "
                                f"(0: no budget) and one of {', '.join(BUDGET_CLOCKS)}")
    return budget, clock


_CALL_CPU = pytest.StashKey[float]()
_BUDGET = pytest.StashKey[tuple[float, str]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Records the CPU seconds of the test's call (read by the budget below)."""
    before = _own_cpu_s()
    yield
    item.stash[_CALL_CPU] = _own_cpu_s() - before


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test not marked ``slow`` whose call took over the budget fails, saying so."""
    outcome = yield
    report = outcome.get_result()
    budget, clock = item.config.stash[_BUDGET]
    if call.when != "call" or not report.passed or budget == 0 or item.get_closest_marker("slow"):
        return
    took = call.duration if clock == "wall" else item.stash.get(_CALL_CPU, 0.0)
    if took > budget:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {took:.1f} s ({clock}), over the {budget:g} s a test not marked "
                           "slow may take: make it faster, or mark it slow (docs/testing.md)")
