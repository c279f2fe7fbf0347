#!/usr/bin/env bash
# Single-stream decode and prefill of this build against an earlier one, same
# run, alternating: tern bench --prompt-tokens 512 --gen-tokens 128 --threads T
# --reps 1 on the 0.46B bench model, PAIRS times (old, new, old, new, ...),
# then the served time to first token of a 512-token prompt (median of 5
# streamed /v1/completions requests, max_tokens 1) for each build.
#   bench/regress_single.sh OLD_TERN [MODEL_DIR]   (env: THREADS=2 PAIRS=3)
set -euo pipefail
OLD="$1"
MODEL="${2:-/work/bench-models/qwen3-0.46b}"
NEW="$(cd "$(dirname "$0")/.." && pwd)/build/tern"
THREADS="${THREADS:-2}"
PAIRS="${PAIRS:-3}"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS, $(date -u +%F\ %H:%M)"
for i in $(seq "$PAIRS"); do
  for which in old new; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    out=$("$bin" bench --model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --threads "$THREADS" --reps 1 --json | tail -1)
    python3 -c "import json,sys; d=json.loads(sys.argv[1]); print('pair $i $which: prefill %.1f tok/s, decode %.2f tok/s (%.0f%% of its triad ceiling)' % (d['prefill_tps'], d['decode_tps'], 100*d['decode_frac_of_ceiling']))" "$out"
  done
done
python3 - "$OLD" "$NEW" "$MODEL" "$THREADS" <<'PY'
import http.client, json, statistics, subprocess, sys, time, socket
old, new, model, threads = sys.argv[1:5]
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def ttft(bin):
    p = port()
    proc = subprocess.Popen([bin, "serve", "--model", model, "--port", str(p), "--threads", threads, "--log-level", "WARNING"])
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", p, timeout=1); c.request("GET", "/health")
            if c.getresponse().status == 200: break
        except OSError: time.sleep(0.1)
    words = " ".join(f"w{i}" for i in range(400))
    res = []
    for i in range(6):
        c = http.client.HTTPConnection("127.0.0.1", p, timeout=300)
        t0 = time.time()
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": f"{i} " + words, "max_tokens": 1, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse(); buf = b""
        while b'"text"' not in buf:
            ch = r.read1(4096)
            if not ch: break
            buf += ch
        if i: res.append(time.time() - t0)
        r.read(); c.close()
    proc.terminate(); proc.wait()
    return statistics.median(res)
for name, b in (("old", old), ("new", new), ("old", old), ("new", new)):
    print(f"served TTFT ({name}): {ttft(b) * 1000:.1f} ms for a ~{400*2+1}-token prompt")
PY
