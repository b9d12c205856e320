#!/usr/bin/env bash
# `make test`: the four folders of tests/ as two pytest processes side by side, because neither keeps a 2-core
# machine busy alone (the emulated cluster's and DVC's tests wait on links, ssh and stage bookkeeping about half of
# their time: 45 % CPU measured during tests/cluster). Stream 1: tests/cluster then tests/notebooks (the emulated
# cluster has one user at a time: only this stream uses it); stream 2: tests/parallel then tests/single, then
# tests/notebooks/test_dvc_run_ownership.py (a 3-minute DVC test that needs no cluster: it evens the two streams out,
# tests/README.md), its output kept in a log and printed once stream 1 ends. The exit code is non-zero if either
# failed. PYTEST_ARGS is passed to both (e.g. PYTEST_ARGS="-x"); `make test-single` etc. run one folder alone.
set -uo pipefail
PY=${PY:-.venv/bin/python}
LOG=$(mktemp "${TMPDIR:-/tmp}/distbench-test.XXXXXX")
# shellcheck disable=SC2086
"$PY" -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} tests/parallel tests/single tests/notebooks/test_dvc_run_ownership.py >"$LOG" 2>&1 &
second=$!
trap 'kill -TERM "$second" 2>/dev/null; wait "$second" 2>/dev/null; rm -f "$LOG"; exit 130' INT TERM
echo "[make test] tests/parallel and tests/single run beside this output (pid $second, log $LOG); printed below when done"
# shellcheck disable=SC2086
"$PY" -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} tests/cluster tests/notebooks \
    --deselect tests/notebooks/test_dvc_run_ownership.py
first_rc=$?
wait "$second"
second_rc=$?
trap - INT TERM
echo
echo "[make test] tests/parallel, tests/single and the run-ownership DVC test:"
cat "$LOG"
rm -f "$LOG"
echo "[make test] tests/cluster + tests/notebooks: exit $first_rc; tests/parallel + tests/single (+ run ownership): exit $second_rc"
[ "$first_rc" -eq 0 ] && [ "$second_rc" -eq 0 ]
