#!/usr/bin/env bash
# The suite in two stages (docs/testing.md), called by `make test` and `make test-fast`:
#   tests/suite.sh "EXPR" [pytest options...]
# EXPR is empty or the start of a -m expression ("not slow and").
#   1. The files that hold real-time deadlines (tests/conftest.py's WALL_CLOCK_FILES, marked wall_clock), one at a
#      time in one process at normal priority (beside other work at the same priority, on 2 cores, they missed
#      deadlines); beside it, in a second process at normal priority, those of them that mostly wait out timeouts
#      and faults (WAITING_FILES, marked wall_clock_waits: little CPU), one at a time.
#   2. Every other test on pytest-xdist workers (PARALLEL, default one per core), each file's tests on one worker;
#      SUITE_LINT, if set, is a command (make lint) run beside them.
# A test not marked slow that takes over 5 s fails (tests/conftest.py, KAME_TEST_BUDGET_S): 5 s of wall clock, or of
# CPU where stage 2 runs at idle priority.
# By default stage 2 and the lint run at the same time as stage 1, at the kernel's idle priority (SCHED_IDLE,
# `chrt --idle 0`; `nice -n 19` where chrt is missing or refused): they take only the CPU time stage 1 leaves,
# which waits on the wall clock most of the time. SUITE_OVERLAP=0 runs them after stage 1 instead.
# Prints each stage's output in order; exits with the worst of them.
set -u
cd "$(dirname "$0")/.."
expr="${1:-}"
shift || true
py="${PY:-.venv/bin/python}"
parallel="${PARALLEL--n auto --dist loadgroup}"
others_log="$(mktemp)"
lint_log="$(mktemp)"
waits_log="$(mktemp)"
# what the run's processes share (tests/app_scenarios.py: each test question recorded once per run)
KAME_TEST_RUN_DIR="$(mktemp -d)"
export KAME_TEST_RUN_DIR
trap 'rm -f "$others_log" "$lint_log" "$waits_log"; rm -rf "$KAME_TEST_RUN_DIR"' EXIT

start_others() {
  if [ -n "${SUITE_LINT:-}" ]; then
    $low_lint bash -c "$SUITE_LINT" >"$lint_log" 2>&1 &
    lint=$!
  fi
  # shellcheck disable=SC2086  # PARALLEL is a list of options
  HF_HUB_OFFLINE=1 KAME_TEST_BUDGET_CLOCK="$budget_clock" $low_others "$py" -m pytest -q -p no:cacheprovider $parallel -m "$expr not wall_clock" "$@" \
    tests >"$others_log" 2>&1 &
  others=$!
}

overlap="${SUITE_OVERLAP:-1}"
if [ "$overlap" = 1 ]; then
  # the lowest priority the kernel has: run only on CPU time nobody else wants
  if chrt --idle 0 true 2>/dev/null; then low_others="chrt --idle 0"; else low_others="nice -n 19"; fi
  low_lint="$low_others"
  budget_clock=cpu  # held off the CPU by stage 1, their wall time is not theirs: the budget counts CPU seconds
  echo "== the other tests (and the lint) beside them, under $low_others"
  start_others "$@"
fi
echo "== the tests with real-time deadlines, one at a time (those that mostly wait beside them)"
# each of the two processes collects only its own files (collecting all of tests/ costs ~9 CPU-s, and the
# real-time stage waits for it); the marks still choose within them
files_of() {  # files_of EXPR: the test files of tests/conftest.py's sets EXPR names, as paths
  "$py" -c "from tests.conftest import WALL_CLOCK_FILES, WAITING_FILES; print(*sorted('tests/' + f for f in $1))"
}
read -r -a wall_files <<<"$(files_of 'WALL_CLOCK_FILES - WAITING_FILES')"
read -r -a wait_files <<<"$(files_of 'WAITING_FILES')"
[ ${#wall_files[@]} -gt 0 ] || wall_files=(tests)  # the sets unreadable: all of tests/, the marks choose
[ ${#wait_files[@]} -gt 0 ] || wait_files=(tests)
# the waiting files in their own process, at normal priority too
HF_HUB_OFFLINE=1 "$py" -m pytest -q -p no:cacheprovider -m "$expr wall_clock_waits" "$@" "${wait_files[@]}" \
  >"$waits_log" 2>&1 &
waits=$!
HF_HUB_OFFLINE=1 "$py" -m pytest -q -p no:cacheprovider -m "$expr wall_clock and not wall_clock_waits" "$@" \
  "${wall_files[@]}"
wall_rc=$?
wait "$waits"
waits_rc=$?
echo "== the tests with real-time deadlines that mostly wait (beside the ones above)"
cat "$waits_log"
if [ "$overlap" != 1 ]; then
  low_others="" low_lint="nice -n 19" budget_clock=wall  # the lint beside the other tests
  start_others "$@"
fi
wait "$others"
others_rc=$?
echo "== the other tests, in parallel ($parallel)"
cat "$others_log"
lint_rc=0
if [ -n "${SUITE_LINT:-}" ]; then
  wait "$lint"
  lint_rc=$?
  echo "== $SUITE_LINT (beside the other tests, under $low_lint): exit $lint_rc"
  cat "$lint_log"
fi
for rc in wall_rc waits_rc others_rc; do  # pytest's 5: no test selected (an empty stage passes)
  [ "${!rc}" -eq 5 ] && printf -v "$rc" 0
done
worst=$(( wall_rc > others_rc ? wall_rc : others_rc ))
worst=$(( worst > waits_rc ? worst : waits_rc ))
exit $(( worst > lint_rc ? worst : lint_rc ))
