#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: the unit tests (release build
# and an ASan/UBSan build), the CUDA op harness (skips without a GPU), then the Python tests (pytest) that drive the tern
# binary against goldens made by the reference implementations, once with the
# release binary and once with the ASan/UBSan one; then each libFuzzer target
# for a bounded time (scripts/fuzz.sh, FUZZ_SECONDS per target, default 20).
# The last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
make -j"$(nproc)" SAN=1 all >/dev/null || { echo "sanitizer build failed"; echo "0 passed, 1 failed"; exit 1; }

pass=0; fail=0
count() { # parses "unit: N passed, N failed" from a log
  local p f
  p=$(grep -Eo '[0-9]+ passed' "$1" | tail -1 | grep -Eo '[0-9]+'); f=$(grep -Eo '[0-9]+ failed' "$1" | tail -1 | grep -Eo '[0-9]+')
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
}
log=$(mktemp)
echo "== unit tests (release)"; scripts/run_unit_tests.sh build | tee "$log"; count "$log"
echo "== unit tests (ASan/UBSan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 scripts/run_unit_tests.sh build-san | tee "$log"; count "$log"
# The CUDA op harness (built when nvcc is present): CUDA ops against the CPU
# reference on a GPU; without one it prints "skipped: ..." and counts as
# neither passed nor failed.
echo "== CUDA op harness (build/ops_test)"
if [ -x build/ops_test ]; then
  build/ops_test >"$log" 2>&1; rc=$?
  grep -v '^PASS' "$log" | tail -n 30
  if grep -q '^skipped' "$log"; then :
  elif [ $rc -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
else
  echo "not built (no nvcc)"
fi
pytest_pass() { # BIN: the whole Python suite against one tern binary
  TERN_BIN="$1" python3 -m pytest -q tests/py 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then grep -qE '[0-9]+ failed' "$log" || fail=$((fail + 1)); fi
  count "$log"
}
echo "== python tests (release)"; pytest_pass "$PWD/build/tern"
echo "== python tests (ASan/UBSan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 pytest_pass "$PWD/build-san/tern"
echo "== fuzz targets (libFuzzer, ASan/UBSan, ${FUZZ_SECONDS:-20} s each)"
bash scripts/fuzz.sh --time "${FUZZ_SECONDS:-20}" | tee "$log"; count "$log"
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
