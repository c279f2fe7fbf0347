#!/usr/bin/env bash
# Quantized CPU benchmark: tern vs llama.cpp at Q8_0, Q4_0, Q4_K (the same GGUF file for both)
# and tern's MLX 8-bit / 4-bit checkpoints (against llama.cpp's Q8_0 / Q4_0 file, the same bits
# per weight: llama.cpp has no MLX reader), same threads, same run, interleaved.
#
# Usage: bench/quant_vs_llamacpp.sh
#
# For each format, ROUNDS times, alternating: a read-only stream (bench/stream_read_main.c,
# the bandwidth ceiling of a weight stream), llama-bench -t $THREADS -p $PROMPT_TOKENS -n
# $GEN_TOKENS -r 1, tern bench --prompt-tokens $PROMPT_TOKENS --gen-tokens $GEN_TOKENS
# --threads $THREADS --reps 1. Each step runs under flock $LOCK (shared benchmark lock) and
# releases it between steps. Printed per format: best prefill / decode tok/s of each side,
# the ratios of the best, the median of the per-round ratios, and tern's decode as a fraction
# of the read-only ceiling (read GB/s / bytes tern reads per decoded token), per round, best.
#
# Set-up (see bench/README.md): the 0.46B model (tests/gen/gen_bench_model.py), its F16 GGUF
# (bench/make_gguf.sh), then
#   llama-quantize M-f16.gguf M-Q8_0.gguf Q8_0   (and Q4_0, Q4_K_M)
#   python3 -m mlx_lm convert --hf-path M --mlx-path M-mlx-q8 -q --q-bits 8 --q-group-size 64
#   (and -mlx-q4 with --q-bits 4)
#
# Environment (defaults in brackets):
#   MODEL        base path of the model files       [/work/bench-models/qwen3-0.46b]
#   LLAMACPP_DIR llama.cpp build                    [$HOME/.cache/tern-bench/llama.cpp]
#   TERN [build/tern]  THREADS [2]  PROMPT_TOKENS [512]  GEN_TOKENS [128]  ROUNDS [3]
#   FORMATS      [Q8_0 Q4_0 Q4_K_M mlx-q8 mlx-q4]
#   LOCK         [/work/coord/bench.lock; empty: no per-step lock, for a caller that holds
#                the benchmark lock for the whole run]  OUT_DIR [a fresh temporary directory]
set -uo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL="${MODEL:-/work/bench-models/qwen3-0.46b}"
LLAMACPP_DIR="${LLAMACPP_DIR:-$HOME/.cache/tern-bench/llama.cpp}"
LLAMA_BENCH="${LLAMA_BENCH:-$LLAMACPP_DIR/build/bin/llama-bench}"
TERN="${TERN:-$REPO_ROOT/build/tern}"
THREADS="${THREADS:-2}"
PROMPT_TOKENS="${PROMPT_TOKENS:-512}"
GEN_TOKENS="${GEN_TOKENS:-128}"
ROUNDS="${ROUNDS:-3}"
FORMATS="${FORMATS:-Q8_0 Q4_0 Q4_K_M mlx-q8 mlx-q4}"
LOCK="${LOCK-/work/coord/bench.lock}"
OUT_DIR="${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tern-quant-bench.XXXXXX")}"
mkdir -p "$OUT_DIR"
say() { echo "quant_vs_llamacpp: $*" >&2; }
locked() {
    if [ -n "$LOCK" ] && { [ -e "$LOCK" ] || touch "$LOCK" 2>/dev/null; }; then flock "$LOCK" "$@"; else "$@"; fi
}

READ_BIN="$OUT_DIR/stream_read"
${CC:-cc} -std=c11 -O3 -march=native -o "$READ_BIN" "$REPO_ROOT/bench/stream_read_main.c" -lpthread \
    || { say "cannot compile bench/stream_read_main.c"; exit 1; }
[ -x "$LLAMA_BENCH" ] || { say "llama-bench not found at $LLAMA_BENCH (bench/setup_llamacpp.sh)"; exit 1; }
say "raw outputs in $OUT_DIR; machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"

for f in $FORMATS; do
    case "$f" in
        mlx-q8) tm="$MODEL-mlx-q8"; lg="$MODEL-Q8_0.gguf" ;;
        mlx-q4) tm="$MODEL-mlx-q4"; lg="$MODEL-Q4_0.gguf" ;;
        *) tm="$MODEL-$f.gguf"; lg="$MODEL-$f.gguf" ;;
    esac
    [ -e "$tm" ] && [ -f "$lg" ] || { say "skipping $f: $tm or $lg missing"; continue; }
    for r in $(seq 1 "$ROUNDS"); do
        say "$f round $r/$ROUNDS"
        locked "$READ_BIN" --threads "$THREADS" --reps 5 --json 2>/dev/null | tail -n 1 > "$OUT_DIR/$f.$r.read.json"
        locked "$LLAMA_BENCH" -m "$lg" -t "$THREADS" -p "$PROMPT_TOKENS" -n "$GEN_TOKENS" -r 1 -o json \
            > "$OUT_DIR/$f.$r.llama.json" 2> "$OUT_DIR/$f.$r.llama.stderr" || say "llama-bench failed on $lg"
        locked "$TERN" bench --model "$tm" --prompt-tokens "$PROMPT_TOKENS" --gen-tokens "$GEN_TOKENS" \
            --threads "$THREADS" --reps 1 --json > "$OUT_DIR/$f.$r.tern.out" 2> "$OUT_DIR/$f.$r.tern.stderr" \
            || say "tern bench failed on $tm"
    done
done

python3 - "$OUT_DIR" "$ROUNDS" "$FORMATS" <<'PY'
import json, os, statistics, sys
out, rounds, formats = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
print("| format | tern prefill | llama.cpp prefill | ratio (median) | tern decode | llama.cpp decode "
      "| ratio (median) | tern decode / read-only ceiling (best, median) | read GB/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for f in formats:
    rows = []
    for r in range(1, rounds + 1):
        try:
            rd = json.load(open(f"{out}/{f}.{r}.read.json"))["read_gbps"]
            ll = json.load(open(f"{out}/{f}.{r}.llama.json"))
            pp = [t["avg_ts"] for t in ll if t.get("n_prompt", 0) > 0][0]
            tg = [t["avg_ts"] for t in ll if t.get("n_gen", 0) > 0][0]
            tj = json.loads(open(f"{out}/{f}.{r}.tern.out").read().strip().splitlines()[-1])
            ceil = rd * 1e9 / tj["weight_bytes_per_token"]
            rows.append((rd, pp, tg, tj["prefill_tps"], tj["decode_tps"], tj["decode_tps"] / ceil))
        except Exception as e:  # noqa: BLE001 - a failed round is reported, not fatal
            print(f"<!-- {f} round {r}: {e} -->")
    if not rows:
        continue
    bp, bt = max(x[1] for x in rows), max(x[2] for x in rows)
    tp, tt = max(x[3] for x in rows), max(x[4] for x in rows)
    mp = statistics.median(x[3] / x[1] for x in rows)
    mt = statistics.median(x[4] / x[2] for x in rows)
    fr = [x[5] for x in rows]
    print(f"| {f} | {tp:.1f} | {bp:.1f} | {tp / bp:.2f}x ({mp:.2f}x) | {tt:.1f} | {bt:.1f} | {tt / bt:.2f}x ({mt:.2f}x) "
          f"| {100 * max(fr):.0f}%, {100 * statistics.median(fr):.0f}% | {statistics.median(x[0] for x in rows):.1f} |")
PY
