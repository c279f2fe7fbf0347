#!/usr/bin/env bash
# The GPU checks and benchmarks of the CUDA backend, run on a GPU machine
# from the root of a tern checkout that holds a bundle made here by
#   scripts/cuda_device_bundle.sh .dev/cuda && tar -cJf .dev/cuda/tree.tar.xz tests/py tests/gen bench/cuda bench/ktrace
# (plus ../shared's fixtures/models under .dev/cuda/shared when ../shared is not there).
# Usage: bash .dev/cuda/tree/bench/cuda/device_run.sh PHASE...   (after unpacking, or
#        bash bench/cuda/device_run.sh PHASE... in a checkout that has the bundle)
# Phases: ops (op harness), opstime (its kernel timings), floor (ops_test --floor: a one-row product's cost
# apart from its bytes), chain (ops_test --chain: a decode layer's
# products as four kernels and as one chain kernel (chain.cu) in its forms, beside the read bandwidth, then
# in sequence under the one-row kernel's modes), ktrace (the decode graph's kernels on the
# critical path, through CUPTI: bench/ktrace/ktrace.c, ktrace_summary.py; trace into $OUT), fwd (GPU forward test), parity (fixture parity
# suite with TERN_DEVICE=cuda, MoE deselected), batch (server batching tests
# on the GPU), gen (random-weight Qwen3-8B shape, bf16, into /tmp/q8b),
# bench (tern bench batch 1: prefill 512 + decode 128, 3 runs, twice),
# readpat (ops_test --readpat: the weight stream's rate by the order of its loads),
# batchbench (tern bench --batch 1,8,32,64), batchsteady (the same with 1024 tokens a request, so that
# every row decodes together for a while: "all rows decoding" is the aggregate decode), benchcuda (build/bench_cuda),
# benchab (tern bench under each environment of the ;-separated list AB,
# by default: defaults, then each decode-pass feature off in turn; with CLOCKS=1 the SM clock and power are
# sampled while they run:
# TERN_CUDA_GRAPH=0, TERN_CUDA_FUSE=0, TERN_CUDA_SUMMARY=0, all three, defaults
# again), prof (TERN_CUDA_PROF=1: device time per class of op, decode), gguf (the same weights as
# an F16 GGUF for llama.cpp, /tmp/q8b-f16.gguf; needs gguf-py from llama.cpp's tree in $D/gguf-py),
# llamabench (llama.cpp's llama-bench, CUDA build carried as $D/llama.tar.xz by scripts/cuda_llama_bundle.sh,
# which also says what to leave out of the copy: pp512 + tg128, -fa 1),
# batchab (batchbench under each environment of the ;-separated AB), kerns (Nsight Compute's device time of
# each of a prefill's first KERNS kernels, default 40), ncugemm (Nsight Compute's speed of light and memory
# sections of the first layer's four prefill GEMMs), ncu (Nsight Compute on one
# layer's prefill attention and the first decode kernels, reports into $OUT). In benchab and batchab an
# entry "ref" or "ref VAR=..." runs another build's tern, carried as $D/ref.tar.xz by
# scripts/cuda_ref_bundle.sh REV, instead of this one (AB=";ref;;ref": the two builds alternately).
# Logs of ops go to $OUT when set.
D=${BUNDLE:-.dev/cuda}
OUT=${OUT:-/tmp}
[ -d "$D/bin" ] || tar -xJf "$D/bin.tar.xz" -C "$D"
if [ -f "$D/tree.tar.xz" ]; then
  [ -d "$D/tree/tests/py" ] || { mkdir -p "$D/tree" && tar -xJf "$D/tree.tar.xz" -C "$D/tree"; }
  [ -e "$D/tree/tests/fixtures" ] || ln -sfn "$PWD/tests/fixtures" "$D/tree/tests/fixtures"
  [ -e "$D/tree/models" ] || ln -sfn "$PWD/models" "$D/tree/models"
fi
TREE=$D/tree; [ -d "$TREE" ] || TREE=.
export LD_LIBRARY_PATH=$PWD/$D/lib PYTHONUNBUFFERED=1
[ -d "$D/shared" ] && export TERN_SHARED=$PWD/$D/shared
T=$PWD/$D/bin/tern
# The tern of an AB entry ("ref ..." the other build's) into $b, the entry's environment into $v.
pick() {
  b=$T; v=$1
  case $v in ref*)
    [ -x "$D/ref/tern" ] || tar -xJf "$D/ref.tar.xz" -C "$D"
    b=$PWD/$D/ref/tern; v=${v#ref} ;;
  esac
  echo "--- $([ "$b" = "$T" ] && echo this || echo "ref $(head -c 12 "$D/ref/REV" 2>/dev/null)") ${v:-defaults}"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for ph in "$@"; do
  echo "=== $ph $(date +%T)"
  case $ph in
  ops) timeout 300 "$D/bin/ops_test" >"$OUT/ops.log" 2>&1; echo "rc=$?"; grep -v '^PASS' "$OUT/ops.log" | tail -8 ;;
  opstime) timeout 300 "$D/bin/ops_test" --time >"$OUT/ops_time.log" 2>&1; echo "rc=$?"; grep -iE "gemv|matmul|gate|M=" "$OUT/ops_time.log" | head -40 ;;
  readpat) timeout 120 "$D/bin/ops_test" --readpat 2>&1 | grep -E "^readpat|skipped" ;;
  floor) timeout 120 "$D/bin/ops_test" --floor 2>&1 | grep -vE "^PASS" ;;
  chain) timeout 200 "$D/bin/ops_test" --chain 2>&1 | grep -E "^--|^decode|^read|^chain|skipped" ;;
  ktrace) [ -f "$D/lib/libktrace.so" ] || { echo "no $D/lib/libktrace.so (bundle built without CUPTI)"; continue; }
    CUDA_INJECTION64_PATH=$PWD/$D/lib/libktrace.so TERN_KTRACE=$OUT/ktrace.tsv timeout 150 "$T" bench --device cuda \
      --model /tmp/q8b --prompt-tokens 512 --gen-tokens 128 --reps 1 2>&1 | tail -1
    K=$TREE/bench/ktrace; [ -f "$K/ktrace_summary.py" ] || K=bench/ktrace
    python3 "$K/ktrace_summary.py" "$OUT/ktrace.tsv" --layer "${KT_LAYER:-11}" ;;
  fwd) timeout 300 "$D/bin/test_forward_cuda" 2>&1 | tail -30 ;;
  parity) (cd "$TREE" && TERN_DEVICE=cuda TERN_BIN=$T timeout 300 python3 -m pytest -q -k "not moe" tests/py/test_model_parity.py 2>&1 | tail -15) ;;
  batch) (cd "$TREE" && TERN_DEVICE=cuda TERN_BIN=$T timeout 200 python3 -m pytest -q -x -k "not draft" tests/py/test_server_batching.py 2>&1 | tail -8) ;;
  gen) python3 "$TREE/bench/cuda/gen_qwen3_8b.py" /tmp/q8b 2>&1 | tail -2 ;;
  bench) for r in 1 2; do
      TERN_CUDA_STATS=1 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 128 --reps 3 2>&1 | tail -5
    done ;;
  batchbench) TERN_CUDA_STATS=1 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 16 --gen-tokens 32 --reps 2 --batch 1,8,32,64 2>&1 | tail -12 ;;
  batchsteady) "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 16 --gen-tokens 1024 --reps 1 --batch 1,8,32,64 2>&1 | grep -E "^batch" ;;
  benchcuda) "$D/bin/bench_cuda" 2>&1 | tail -12 ;;
  benchab) IFS=';' read -ra vs <<<"${AB:-;TERN_CUDA_GRAPH=0;TERN_CUDA_FUSE=0;TERN_CUDA_SUMMARY=0;TERN_CUDA_GRAPH=0 TERN_CUDA_FUSE=0 TERN_CUDA_SUMMARY=0;}"
    if [ -n "$CLOCKS" ]; then
      nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 200 >"$OUT/clocks.log" &
      CP=$!
    fi
    for e in "${vs[@]}"; do
      pick "$e"
      env $v TERN_CUDA_STATS=1 timeout 150 "$b" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 128 --reps 3 2>&1 | tail -5
    done
    if [ -n "$CLOCKS" ]; then
      kill "$CP"
      echo "SM clock while the entries ran (samples every 200 ms; the highest power drawn):"
      cut -d, -f1 "$OUT/clocks.log" | sort | uniq -c | sort -rn | head -5
      cut -d, -f3 "$OUT/clocks.log" | sort -n | tail -1
    fi ;;
  gguf) PYTHONPATH=$PWD/$D/gguf-py python3 "$TREE/bench/cuda/gen_qwen3_8b_gguf.py" /tmp/q8b /tmp/q8b-f16.gguf 2>&1 | tail -2 ;;
  llamabench) [ -d "$D/llama" ] || tar -xJf "$D/llama.tar.xz" -C "$D"
    # llama.cpp links cuBLAS, cudart and NCCL dynamically: take them from wherever the machine has them.
    LLP=$PWD/$D/llama:$LD_LIBRARY_PATH
    for l in $(ldd "$D/llama/llama-bench" | awk '/not found/{print $1}'); do
      p=$(timeout 30 find /usr /opt /root /lib /lib64 -name "$l" 2>/dev/null | head -1); [ -n "$p" ] && LLP=$LLP:$(dirname "$p")
    done
    LD_LIBRARY_PATH=$LLP ldd "$D/llama/llama-bench" | grep "not found"
    for r in 1 2; do LD_LIBRARY_PATH=$LLP "$D/llama/llama-bench" -m /tmp/q8b-f16.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "qwen3|error|failed" ; done ;;
  batchab) IFS=';' read -ra vs <<<"${AB:-}"
    for e in "${vs[@]}"; do
      pick "$e"
      env $v timeout 200 "$b" bench --device cuda --model /tmp/q8b --prompt-tokens 16 --gen-tokens 32 --reps 2 --batch 1,8,32,64 2>&1 | grep -E "^batch"
    done ;;
  kerns) N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$N" ] || { echo "no ncu on this machine"; continue; }
    # every kernel of a prefill of 512 (the first KERNS launches: the embedding and the first layers), its device time
    timeout 240 "$N" --clock-control none --cache-control none --metrics gpu__time_duration.sum -c "${KERNS:-40}" "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 1 --reps 1 >"$OUT/ncu_kerns.txt" 2>&1; echo "rc=$?"
    awk '/^  [A-Za-z_].*\(/{n=$1} /gpu__time_duration.sum/{print n, $(NF-1), $NF}' "$OUT/ncu_kerns.txt" | head -"${KERNS:-40}" ;;
  ncugemm) N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$N" ] || { echo "no ncu on this machine"; continue; }
    # the first layer's four prefill GEMMs (qkv, o, gate/up, down): throughput of each memory level and the tensor pipes
    timeout 240 "$N" --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:tw_kernel -c 4 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 1 --reps 1 >"$OUT/ncu_gemm.txt" 2>&1; echo "rc=$?"
    grep -E "tw_kernel|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Memory Throughput|Mem Busy|Max Bandwidth|L2 Hit" "$OUT/ncu_gemm.txt" | cut -c1-110 | head -60 ;;
  ncu) N=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$N" ] || { echo "no ncu on this machine"; continue; }
    NS="--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
    # prefill 512: one layer's attention (tiled + fold; NCU_ATTN=1); then the first decode pass's kernels (skipped: the prefill's 36 rope kernels and its head, one-row)
    if [ -n "${NCU_ATTN:-}" ]; then
      timeout 240 "$N" $NS -k regex:'attn_tiled|attn_fold' -c 2 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 2 --reps 1 >"$OUT/ncu_attn.txt" 2>&1; echo "rc=$?"
    fi
    timeout 240 "$N" $NS -k regex:'sk_one|mma_skinny|attn_split|qkv_rope' --launch-skip 37 -c 6 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 2 --reps 1 >"$OUT/ncu_decode.txt" 2>&1; echo "rc=$?"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size|Stall|Warp Cycles Per Issued|L2 Cache Throughput|Mem Busy|Max Bandwidth" "$OUT/ncu_decode.txt" | cut -c1-120 | head -90 ;;
  prof) TERN_CUDA_PROF=1 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 16 --gen-tokens 128 --reps 1 2>&1 | tail -14
        echo "--- prefill 512"
        TERN_CUDA_PROF=1 "$T" bench --device cuda --model /tmp/q8b --prompt-tokens 512 --gen-tokens 4 --reps 1 2>&1 | tail -26 | head -13 ;;
  esac
done
echo "=== end $(date +%T)"
