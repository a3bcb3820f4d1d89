#!/usr/bin/env bash
# The suite in two stages at once (docs/testing.md), called by `make test` and `make test-fast`:
#   tests/suite.sh "EXPR" [pytest options...]
# EXPR is empty or the start of a -m expression ("not slow and"). The files that hold real-time deadlines
# (tests/conftest.py's WALL_CLOCK_FILES, marked wall_clock) run one at a time in one process at normal priority;
# meanwhile every other test runs under `nice -n 19` on pytest-xdist workers (PARALLEL, default one per core), so
# it takes only the CPU the real-time tests leave: on 2 cores, a real-time test beside another worker's model loads
# at equal priority missed its deadlines (a browser page drew 5 frames a second instead of 10).
# SUITE_LINT, if set, is a command (make lint) run under nice beside them too.
# Prints each stage's output, the others after the real-time one; exits with the worst of them.
set -u
cd "$(dirname "$0")/.."
expr="${1:-}"
shift || true
py="${PY:-.venv/bin/python}"
parallel="${PARALLEL--n auto --dist loadgroup}"
others_log="$(mktemp)"
lint_log="$(mktemp)"
trap 'rm -f "$others_log" "$lint_log"' EXIT
lint_rc=0
if [ -n "${SUITE_LINT:-}" ]; then
  nice -n 19 bash -c "$SUITE_LINT" >"$lint_log" 2>&1 &
  lint=$!
fi
# shellcheck disable=SC2086  # PARALLEL is a list of options
HF_HUB_OFFLINE=1 nice -n 19 "$py" -m pytest -q -p no:cacheprovider $parallel -m "$expr not wall_clock" "$@" tests \
  >"$others_log" 2>&1 &
others=$!
echo "== the tests with real-time deadlines, one at a time (the others run meanwhile under nice)"
HF_HUB_OFFLINE=1 "$py" -m pytest -q -p no:cacheprovider -m "$expr wall_clock" "$@" tests
wall_rc=$?
wait "$others"
others_rc=$?
echo "== the other tests, in parallel under nice"
cat "$others_log"
if [ -n "${SUITE_LINT:-}" ]; then
  wait "$lint"
  lint_rc=$?
  echo "== $SUITE_LINT (under nice, beside the tests): exit $lint_rc"
  cat "$lint_log"
fi
for rc in wall_rc others_rc; do  # pytest's 5: no test selected (an empty stage passes)
  [ "${!rc}" -eq 5 ] && printf -v "$rc" 0
done
worst=$(( wall_rc > others_rc ? wall_rc : others_rc ))
exit $(( worst > lint_rc ? worst : lint_rc ))
