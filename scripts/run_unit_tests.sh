#!/usr/bin/env bash
# Runs the unit-test program of every tests/unit/test_*.c from BUILD/tests and prints
# one line per program plus the summary line "N passed, N failed". A program exits 0
# on pass, 77 to skip; a missing program fails (programs left in BUILD by tests that
# no longer exist are not run).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
pass=0; fail=0; skip=0
for src in "$root"/tests/unit/test_*.c; do
  name=$(basename "$src" .c)
  t=$build/tests/$name
  case $t in /*) ;; *) t=$root/$t ;; esac # BUILD relative to the checkout
  if [ ! -x "$t" ]; then echo "FAIL $name (not built)"; fail=$((fail+1)); continue; fi
  log=$(mktemp)
  if (cd "$root" && "$t") >"$log" 2>&1; then
    echo "PASS $name"; pass=$((pass+1))
  else
    rc=$?
    if [ $rc -eq 77 ]; then echo "SKIP $name"; skip=$((skip+1));
    else echo "FAIL $name (exit $rc)"; tail -n 30 "$log" | sed 's/^/    /'; fail=$((fail+1)); fi
  fi
  rm -f "$log"
done
echo "unit: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
