#!/usr/bin/env bash
# Runs every unit-test program in BUILD/tests and prints one line per program plus
# the summary line "N passed, N failed". A program exits 0 on pass, 77 to skip.
set -u
build=${1:-build}
pass=0; fail=0; skip=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  log=$(mktemp)
  if (cd "$(dirname "$0")/.." && "$t") >"$log" 2>&1; then
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
