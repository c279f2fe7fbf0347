#!/usr/bin/env bash
# Builds the libFuzzer targets (make fuzz: clang, ASan + UBSan) and runs them.
#
#   scripts/fuzz.sh [--time SECONDS] [--runs N] [--dir DIR] [TARGET...]
#
# Each target (default: every tests/fuzz/fuzz_*.c) runs for SECONDS (default
# 20) or for N executions, on its seed corpus: inputs made from the fixtures by
# tests/fuzz/seeds.py plus the committed ones in tests/fuzz/corpus/TARGET
# (hand-written seeds and every input that once crashed a target). New inputs
# and crash reproducers go under DIR (default: a temporary directory, removed
# afterwards); the committed corpus is only read. A target passes when libFuzzer
# finds nothing within its budget. The last line is "fuzz: N passed, N failed".
# FUZZ_TIMEOUT (seconds, default 10) is the time one input may take before
# libFuzzer calls it a hang; long campaigns that may be paused (SIGSTOP) need a
# larger one, since a paused input's clock keeps running.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=20 runs="" dir="" targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) secs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do t=${f#tests/fuzz/fuzz_}; targets+=("${t%.c}"); done
fi
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (scripts/setup.sh installs it)"; echo "fuzz: 0 passed, 1 failed"; exit 1
fi
if ! make -j"$(nproc)" fuzz >/dev/null; then
  echo "fuzz: build failed"; echo "fuzz: 0 passed, 1 failed"; exit 1
fi
tmp=""
if [ -z "$dir" ]; then tmp=$(mktemp -d); dir=$tmp; fi
# Input size caps: a tokenizer.json or a template is parsed whole per input.
max_len() { case "$1" in tokenizer) echo 16384 ;; jinja) echo 8192 ;; *) echo 65536 ;; esac; }
pass=0 fail=0
for t in "${targets[@]}"; do
  bin=build-fuzz/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz $t: no such target"; fail=$((fail + 1)); continue; }
  w=$dir/$t
  mkdir -p "$w/corpus" "$w/seeds" "$w/artifacts"
  python3 tests/fuzz/seeds.py "$t" "$w/seeds"
  budget=(-max_total_time="$secs")
  [ -n "$runs" ] && budget=(-runs="$runs")
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" "${budget[@]}" -max_len="$(max_len "$t")" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$w/artifacts/" "$w/corpus" "$w/seeds" "tests/fuzz/corpus/$t" >"$w/log" 2>&1
  rc=$?
  line=$(grep -E '^#[0-9]+' "$w/log" | tail -1)
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$w/log" | grep -Eo '[0-9]+$')
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); echo "fuzz $t: ok, ${execs:-?} executions; $line"
  else
    fail=$((fail + 1)); echo "fuzz $t: FAILED (exit $rc); $line"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$w/log" | head -8 | sed 's/^/  /'
    [ -n "$tmp" ] && for a in "$w"/artifacts/*; do [ -f "$a" ] && cp "$a" "build-fuzz/" && echo "  reproducer kept: build-fuzz/$(basename "$a")"; done
  fi
done
[ -n "$tmp" ] && rm -rf "$tmp"
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
