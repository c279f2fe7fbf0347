#!/usr/bin/env bash
# CPU benchmark: tern vs llama.cpp on the same weights, same threads, same run.
#
# Usage: bench/cpu_vs_llamacpp.sh [HF_MODEL_DIR] [GGUF_F16]
#
# Runs, in this order:
#   (a) STREAM triad (bench/stream_triad_main.c) at $THREADS threads -> memory bandwidth
#   (b) llama-bench -m GGUF -t $THREADS -p $PROMPT_TOKENS -n $GEN_TOKENS -r $REPS -> pp / tg tok/s
#       (and the same on GGUF_BF16 when that file exists: llama.cpp's BF16 path is its faster one
#       for prefill on CPUs with avx512_bf16; the F16 row is the baseline the ratios use)
#   (c) build/tern bench --model DIR --prompt-tokens .. --gen-tokens .. --threads .. --reps $REPS --json
#       ($TERN_REPS times; its last stdout line is JSON with prefill_tps and decode_tps)
#   (d) STREAM triad again
#   (e) $PAIRS decode-only pairs, alternating: llama-bench F16 -p 0 -n $GEN_TOKENS -r 2, then
#       tern bench --prompt-tokens 16 --gen-tokens $GEN_TOKENS --reps 2 (best sample of each);
#       on a host whose bandwidth drifts, alternating short runs compares the two at nearly the
#       same moment, and the table lists every pair's ratio and their median
# and prints a markdown table: prefill and decode tok/s for both (best of the repetitions),
# tern / llama.cpp ratios, decode as % of the bandwidth ceiling
# (ceiling = triad bandwidth / weight bytes read per decoded token). The triad bandwidth used is
# the best of every triad measured in the run (before, after, and the one tern bench reports):
# on a shared machine contention only lowers it, so the best is the closest to the true ceiling.
#
# Weight bytes per token = every weight tensor in its stored dtype, except the input embedding
# table (a row gather); with tied embeddings the table is counted once, as the output matmul.
# llama.cpp F16 and tern BF16 read the same number of bytes.
#
# Environment (defaults in brackets):
#   MODEL_DIR      HF model directory         [$HOME/.cache/tern-bench/qwen3-0.46b]
#   GGUF           llama.cpp F16 GGUF          [$HOME/.cache/tern-bench/qwen3-0.46b-f16.gguf]
#   GGUF_BF16      optional BF16 GGUF          [GGUF's NAME-bf16.gguf sibling if present, else
#                                               $HOME/.cache/tern-bench/qwen3-0.46b-bf16.gguf]
#   LLAMACPP_DIR   llama.cpp build from bench/setup_llamacpp.sh [$HOME/.cache/tern-bench/llama.cpp]
#   LLAMA_BENCH    llama-bench binary          [$LLAMACPP_DIR/build/bin/llama-bench]
#   TERN           tern binary                 [build/tern]
#   THREADS [2]  PROMPT_TOKENS [512]  GEN_TOKENS [128]  REPS [3] (llama-bench -r, tern --reps)
#   TERN_REPS [1] (tern bench processes)  TERN_ARGS [--reps $REPS] (extra tern bench arguments)
#   TRIAD_MIB [256] (per array)  TRIAD_REPS [10]  PAIRS [3] (interleaved decode pairs; 0 = none)
#   SKIP_LLAMACPP=1 / SKIP_TERN=1 to leave one side out.
#   OUT_DIR        where raw outputs are kept  [a fresh temporary directory]
#   REPORT_ONLY=1  measure nothing; print the table from the raw outputs already in OUT_DIR
#   WAIT_IDLE [120] before each measurement, wait up to this many seconds for the CPUs to be
#                  >= 90% idle (3 s samples, 3 in a row); 0 = don't wait. Steps that start on a
#                  busy machine are listed under the table.
#   LLAMA_BENCH_ARGS  extra llama-bench arguments (e.g. "-fa 1", or "-lm none" to load the weights
#                  into memory instead of mmapping them)
set -uo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${HOME}/.cache/tern-bench"
MODEL_DIR="${1:-${MODEL_DIR:-$CACHE/qwen3-0.46b}}"
GGUF="${2:-${GGUF:-$CACHE/qwen3-0.46b-f16.gguf}}"
if [ -z "${GGUF_BF16:-}" ]; then
    # The BF16 GGUF next to the F16 one (NAME-f16.gguf -> NAME-bf16.gguf), else the cache default.
    GGUF_BF16="${GGUF%-f16.gguf}-bf16.gguf"
    [ "$GGUF_BF16" != "$GGUF" ] && [ -f "$GGUF_BF16" ] || GGUF_BF16="$CACHE/qwen3-0.46b-bf16.gguf"
fi
LLAMACPP_DIR="${LLAMACPP_DIR:-$CACHE/llama.cpp}"
LLAMA_BENCH="${LLAMA_BENCH:-$LLAMACPP_DIR/build/bin/llama-bench}"
TERN="${TERN:-$REPO_ROOT/build/tern}"
THREADS="${THREADS:-2}"
PROMPT_TOKENS="${PROMPT_TOKENS:-512}"
GEN_TOKENS="${GEN_TOKENS:-128}"
REPS="${REPS:-3}"
TERN_REPS="${TERN_REPS:-1}"
TERN_ARGS="${TERN_ARGS:---reps $REPS}"
TRIAD_MIB="${TRIAD_MIB:-256}"
TRIAD_REPS="${TRIAD_REPS:-10}"
PAIRS="${PAIRS:-3}"
SKIP_LLAMACPP="${SKIP_LLAMACPP:-0}"
SKIP_TERN="${SKIP_TERN:-0}"
REPORT_ONLY="${REPORT_ONLY:-0}"
WAIT_IDLE="${WAIT_IDLE:-120}"
LLAMA_BENCH_ARGS="${LLAMA_BENCH_ARGS:-}"
OUT_DIR="${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tern-cpu-bench.XXXXXX")}"
mkdir -p "$OUT_DIR"

say() { echo "cpu_vs_llamacpp: $*" >&2; }

if [ ! -f "$MODEL_DIR/config.json" ]; then
    say "no HF model at $MODEL_DIR (config.json missing); see bench/README.md"
    exit 1
fi
say "model dir: $MODEL_DIR"
say "gguf:      $GGUF"
say "raw outputs in $OUT_DIR"

# Percentage of CPU time idle over 3 seconds, from /proc/stat.
idle_pct() {
    local u n s i w x y z t1 i1 t2 i2
    read -r _ u n s i w x y z _ < /proc/stat
    t1=$((u + n + s + i + w + x + y + z)); i1=$((i + w))
    sleep 3
    read -r _ u n s i w x y z _ < /proc/stat
    t2=$((u + n + s + i + w + x + y + z)); i2=$((i + w))
    echo $(( t2 > t1 ? 100 * (i2 - i1) / (t2 - t1) : 100 ))
}

# wait_quiet STEP: wait up to $WAIT_IDLE s for 3 consecutive >= 90% idle samples.
wait_quiet() {
    [ "$WAIT_IDLE" -gt 0 ] 2>/dev/null || return 0
    [ -r /proc/stat ] || return 0
    local start=$SECONDS ok=0 v=100
    while [ $((SECONDS - start)) -lt "$WAIT_IDLE" ]; do
        v=$(idle_pct)
        if [ "$v" -ge 90 ]; then ok=$((ok + 1)); else ok=0; fi
        [ "$ok" -ge 3 ] && return 0
    done
    say "machine still busy (${v}% idle) after ${WAIT_IDLE}s; running $1 anyway"
    echo "$1 (${v}% idle)" >> "$OUT_DIR/busy.txt"
}

run_llama_bench() {  # NAME GGUF
    wait_quiet "llama-bench $(basename "$2")"
    say "running llama-bench -m $2 -t $THREADS -p $PROMPT_TOKENS -n $GEN_TOKENS -r $REPS"
    # shellcheck disable=SC2086
    "$LLAMA_BENCH" -m "$2" -t "$THREADS" -p "$PROMPT_TOKENS" -n "$GEN_TOKENS" -r "$REPS" $LLAMA_BENCH_ARGS -o json \
        > "$OUT_DIR/$1.json" 2> "$OUT_DIR/$1.stderr" \
        || { say "llama-bench failed:"; tail -n 5 "$OUT_DIR/$1.stderr" >&2; }
}

measure() {
rm -f "$OUT_DIR/busy.txt"
# (a) STREAM triad.
TRIAD_BIN="$OUT_DIR/stream_triad"
if ! ${CC:-cc} -std=c11 -O3 -march=native -o "$TRIAD_BIN" "$REPO_ROOT/bench/stream_triad_main.c" -lpthread; then
    say "cannot compile bench/stream_triad_main.c"
    exit 1
fi
say "running STREAM triad ($THREADS threads)"
run_triad() {
    wait_quiet "STREAM triad"
    "$TRIAD_BIN" --threads "$THREADS" --mib "$TRIAD_MIB" --reps "$TRIAD_REPS" --json > "$OUT_DIR/$1" \
        || say "STREAM triad failed"
    head -n 1 "$OUT_DIR/$1" >&2
}
run_triad triad.txt

# (b) llama.cpp.
if [ "$SKIP_LLAMACPP" = "1" ]; then
    say "llama.cpp skipped (SKIP_LLAMACPP=1)"
elif [ ! -x "$LLAMA_BENCH" ]; then
    say "llama-bench not found at $LLAMA_BENCH (run bench/setup_llamacpp.sh)"
elif [ ! -f "$GGUF" ]; then
    say "GGUF not found at $GGUF (see bench/README.md for the conversion command)"
else
    run_llama_bench llama_bench "$GGUF"
    if [ -f "$GGUF_BF16" ]; then
        run_llama_bench llama_bench_bf16 "$GGUF_BF16"
    fi
fi

# (c) tern.
: > "$OUT_DIR/tern.jsonl"
if [ "$SKIP_TERN" = "1" ]; then
    say "tern skipped (SKIP_TERN=1)"
elif [ ! -x "$TERN" ]; then
    say "tern binary not found at $TERN (run make)"
else
    for i in $(seq 1 "$TERN_REPS"); do
        wait_quiet "tern bench"
        say "running tern bench ($i/$TERN_REPS)"
        # shellcheck disable=SC2086  # TERN_ARGS is split into words on purpose
        if "$TERN" bench --model "$MODEL_DIR" --prompt-tokens "$PROMPT_TOKENS" --gen-tokens "$GEN_TOKENS" \
            --threads "$THREADS" $TERN_ARGS --json > "$OUT_DIR/tern.$i.stdout" 2> "$OUT_DIR/tern.$i.stderr"; then
            tail -n 1 "$OUT_DIR/tern.$i.stdout" >> "$OUT_DIR/tern.jsonl"
        else
            say "tern bench is not available or failed:"
            tail -n 3 "$OUT_DIR/tern.$i.stderr" >&2
            break
        fi
    done
fi

# (d) STREAM triad again.
say "running STREAM triad again ($THREADS threads)"
run_triad triad_after.txt

# (e) Interleaved decode-only pairs.
: > "$OUT_DIR/pairs.jsonl"
if [ "$PAIRS" -gt 0 ] 2>/dev/null && [ "$SKIP_LLAMACPP" != "1" ] && [ "$SKIP_TERN" != "1" ] &&
   [ -x "$LLAMA_BENCH" ] && [ -f "$GGUF" ] && [ -x "$TERN" ]; then
    for i in $(seq 1 "$PAIRS"); do
        say "decode pair $i/$PAIRS"
        # shellcheck disable=SC2086
        "$LLAMA_BENCH" -m "$GGUF" -t "$THREADS" -p 0 -n "$GEN_TOKENS" -r 2 $LLAMA_BENCH_ARGS -o json \
            > "$OUT_DIR/pair.$i.llama.json" 2>/dev/null || continue
        "$TERN" bench --model "$MODEL_DIR" --prompt-tokens 16 --gen-tokens "$GEN_TOKENS" --threads "$THREADS" \
            --reps 2 --json 2>/dev/null | tail -n 1 > "$OUT_DIR/pair.$i.tern.json" || continue
        python3 - "$OUT_DIR/pair.$i.llama.json" "$OUT_DIR/pair.$i.tern.json" >> "$OUT_DIR/pairs.jsonl" <<'PY' || true
import json, sys
t = json.load(open(sys.argv[1]))[0]
print(json.dumps({"llama_tg": max(t["samples_ts"]), "tern_tg": json.load(open(sys.argv[2]))["decode_tps"]}))
PY
    done
fi
}

if [ "$REPORT_ONLY" != "1" ]; then
    measure
fi

# Report.
CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
CPU_FLAGS=$(grep -m1 -o -w -E 'avx512f|avx512_bf16|avx2' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')
python3 - "$OUT_DIR" "$MODEL_DIR" "$THREADS" "$PROMPT_TOKENS" "$GEN_TOKENS" "$REPS" "$TERN_REPS" \
    "${CPU_MODEL:-unknown}" "$(nproc)" "$CPU_FLAGS" "$LLAMACPP_DIR" "$GGUF" "$TERN_ARGS" "$GGUF_BF16" "$LLAMA_BENCH_ARGS" <<'PY'
import json, os, struct, sys

out_dir, model_dir, threads, pp, tg, reps, tern_reps, cpu, ncpu, flags, llamacpp_dir, gguf, tern_args, gguf_bf16, lb_args = sys.argv[1:16]
pp, tg = int(pp), int(tg)


def safetensors_headers(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.isfile(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for name in files:
        with open(os.path.join(d, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            yield json.loads(f.read(n))


def weight_bytes_per_token(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    tied = cfg.get("tie_word_embeddings", False)
    total = embed = 0
    has_lm_head = False
    for h in safetensors_headers(d):
        for name, t in h.items():
            if name == "__metadata__":
                continue
            nbytes = t["data_offsets"][1] - t["data_offsets"][0]
            total += nbytes
            if name.endswith("embed_tokens.weight"):
                embed = nbytes
            if name == "lm_head.weight":
                has_lm_head = True
    # The input table is a row gather; when tied (no lm_head), it is read whole as the output matmul.
    return total if (tied and not has_lm_head) else total - embed


def read_json_lines(path):
    rows = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return rows


def triad_of(name):
    rows = read_json_lines(os.path.join(out_dir, name))
    return rows[-1].get("triad_gbps") if rows else None


triad_before = triad_of("triad.txt")
triad_after = triad_of("triad_after.txt")

def llama_bench_result(name):
    """(best pp tok/s, best tg tok/s, description) from llama-bench -o json output."""
    bpp = btg = None
    info = ""
    try:
        for t in json.load(open(os.path.join(out_dir, name))):
            best = max(t["samples_ts"]) if t.get("samples_ts") else t.get("avg_ts")
            if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
                bpp = best
            elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
                btg = best
            info = "llama.cpp: model %s, %d threads, flash_attn %s" % (
                t.get("model_type", "?"), t.get("n_threads", 0), t.get("flash_attn", "?"))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return bpp, btg, info


llama_pp, llama_tg, llama_info = llama_bench_result("llama_bench.json")
bf16_pp, bf16_tg, _ = llama_bench_result("llama_bench_bf16.json")
has_bf16 = bf16_pp is not None or bf16_tg is not None

tern_rows = read_json_lines(os.path.join(out_dir, "tern.jsonl"))
tern_pp = max((r["prefill_tps"] for r in tern_rows if "prefill_tps" in r), default=None)
tern_tg = max((r["decode_tps"] for r in tern_rows if "decode_tps" in r), default=None)
tern_wbytes = next((r["weight_bytes_per_token"] for r in tern_rows if "weight_bytes_per_token" in r), None)
tern_triad = max((r["triad_gbps"] for r in tern_rows if r.get("triad_gbps")), default=None)

triads = [t for t in (triad_before, triad_after, tern_triad) if t]
triad = max(triads) if triads else None
wbytes = weight_bytes_per_token(model_dir)
ceiling = triad * 1e9 / wbytes if triad else None


def fmt(v, spec="%.1f"):
    return spec % v if v is not None else "n/a"


def ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "n/a"


def pct(v):
    return "%.1f%%" % (100.0 * v / ceiling) if v is not None and ceiling else "n/a"


print()
print("| engine | prefill tok/s (pp%d) | decode tok/s (tg%d) | decode %% of bandwidth ceiling |" % (pp, tg))
print("|---|---:|---:|---:|")
print("| tern (bf16) | %s | %s | %s |" % (fmt(tern_pp), fmt(tern_tg), pct(tern_tg)))
print("| llama.cpp (F16) | %s | %s | %s |" % (fmt(llama_pp), fmt(llama_tg), pct(llama_tg)))
print("| tern / llama.cpp (F16) | %s | %s | |" % (ratio(tern_pp, llama_pp), ratio(tern_tg, llama_tg)))
if has_bf16:
    print("| llama.cpp (BF16) | %s | %s | %s |" % (fmt(bf16_pp), fmt(bf16_tg), pct(bf16_tg)))
    print("| tern / llama.cpp (BF16) | %s | %s | |" % (ratio(tern_pp, bf16_pp), ratio(tern_tg, bf16_tg)))
pairs = read_json_lines(os.path.join(out_dir, "pairs.jsonl"))
if pairs:
    rs = sorted(p["tern_tg"] / p["llama_tg"] for p in pairs)
    med = rs[len(rs) // 2] if len(rs) % 2 else (rs[len(rs) // 2 - 1] + rs[len(rs) // 2]) / 2
    print()
    print("Interleaved decode-only pairs (llama.cpp F16 tg%d, then tern): %s -> ratios %s, median %.2fx" % (
        tg, ", ".join("%.1f / %.1f" % (p["llama_tg"], p["tern_tg"]) for p in pairs),
        ", ".join("%.2f" % (p["tern_tg"] / p["llama_tg"]) for p in pairs), med))
print()
print("- machine: %s, %s CPUs online (%s), %s threads used" % (cpu, ncpu, flags.strip() or "?", threads))
print("- STREAM triad (%s threads): %s GB/s used for the ceiling (before %s, after %s, inside tern bench %s)" % (
    threads, fmt(triad, "%.2f"), fmt(triad_before, "%.2f"), fmt(triad_after, "%.2f"), fmt(tern_triad, "%.2f")))
print("- weight bytes per decoded token: %d (%.1f MB)%s" % (
    wbytes, wbytes / 1e6,
    "" if tern_wbytes is None else "; tern reports %d" % tern_wbytes))
print("- decode bandwidth ceiling: %s tok/s" % fmt(ceiling))
print("- best of %s llama-bench repetitions; tern: best over %d tern bench run(s)%s" % (
    reps, len(tern_rows), "" if tern_rows else " (tern bench not available)"))
if llama_info:
    try:
        src = open(os.path.join(llamacpp_dir, "llama.cpp", ".tern-bench-sdist")).read().strip()
    except OSError:
        src = "unknown source"
    print("- %s; built from %s (vendor/llama.cpp)" % (llama_info, src))
print("- commands: `llama-bench -m %s -t %s -p %d -n %d -r %s%s`; `tern bench --model %s --prompt-tokens %d "
      "--gen-tokens %d --threads %s %s --json`" % (gguf, threads, pp, tg, reps, (" " + lb_args) if lb_args else "",
                                                  model_dir, pp, tg, threads, tern_args))
if has_bf16:
    print("- BF16 row: the same llama-bench command on %s" % gguf_bf16)
try:
    busy = [line.strip() for line in open(os.path.join(out_dir, "busy.txt")) if line.strip()]
except OSError:
    busy = []
if busy:
    print("- started on a busy machine (numbers may be low): " + "; ".join(busy))
PY
