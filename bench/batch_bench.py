#!/usr/bin/env python3
"""Continuous batching: aggregate decode throughput of N concurrent streaming
clients, tern serve against llama-server on the same weights, same run.

For each N in --clients (default 1,2,4,8,16), alternating which server goes
first, --runs times: N clients each stream one /v1/completions request of
--tokens (128) tokens (end-of-sequence suppressed on both sides) from a short
distinct prompt. Aggregate tok/s = tokens received by all clients / wall time
from the first request sent to the last token received. tern runs one server
(--max-batch 16); llama-server is restarted with -np N for each N (its slots
are fixed at start), -t THREADS, -c N*1024, --no-webui.

Then the join test: --join-streams (4) tern streams decode while one request
with a ~4k-token prompt joins; the running streams' inter-token gaps during
the join are reported (p50, p99, max) against the single-stream step (median
gap of one stream alone) and the joiner's time to first token.

usage: bench/batch_bench.py --model DIR --gguf FILE.gguf [--threads 2] [--runs 2]
       [--llama-server PATH] [--clients 1,2,4,8,16] [--tokens 128] [--no-join]
Prints one line per measurement and a final JSON object.
"""
import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import threading
import time

from serve_util import free_port, start_server

PROMPTS = ["def add(a, b):", "class Stack:", "import os\n", "def parse(line):", "for i in range(", "x = [",
           "def main():", "# utils\n", "while True:", "try:\n    import", "def __init__(self", "return {",
           "with open(", "async def fetch(", "if __name__ ==", "lambda x:"]


def stream(port, body, times):
    """Streams one request; appends the arrival time of every data event with text; returns tokens."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:300]!r}")
    usage_tokens, events, buf = None, 0, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                d = json.loads(line[6:])
                if d.get("usage"):
                    usage_tokens = d["usage"].get("completion_tokens")
                ch = d.get("choices") or []
                if ch and (ch[0].get("text") or ch[0].get("delta", {}).get("content")):
                    events += 1
                    times.append(time.time())
    c.close()
    return usage_tokens if usage_tokens else events


def body_for(i, tokens, kind, eos_ids):
    b = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": tokens, "stream": True, "temperature": 0,
         "stream_options": {"include_usage": True}}
    if kind == "llama":
        b["ignore_eos"] = True
    else:
        b["logit_bias"] = {str(e): -100 for e in eos_ids}
    return b


def aggregate(port, n, tokens, kind, eos_ids):
    times = [[] for _ in range(n)]
    got = [0] * n
    errs = []

    def run(i):
        try:
            got[i] = stream(port, body_for(i, tokens, kind, eos_ids), times[i])
        except Exception as ex:  # noqa: BLE001 - reported below
            errs.append(str(ex))

    t0 = time.time()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise RuntimeError(errs[0])
    end = max(t[-1] for t in times if t)
    return sum(got) / (end - t0), sum(got)


def start_llama(path, gguf, threads, n, ctx=None, extra=()):
    port = free_port()
    proc = subprocess.Popen([path, "-m", gguf, "-t", str(threads), "-tb", str(threads), "-np", str(n),
                             "-c", str(ctx or max(n * 1024, 8192)), "--port", str(port), "--host", "127.0.0.1", "--no-webui",
                             *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    return proc, port


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def join_test(port, eos_ids, streams, long_prompt):
    # The single-stream step: median gap of one stream alone.
    t1 = []
    stream(port, body_for(0, 96, "tern", eos_ids), t1)
    step = statistics.median([b - a for a, b in zip(t1[16:], t1[17:])])
    times = [[] for _ in range(streams)]
    ts = [threading.Thread(target=stream, args=(port, body_for(i, 320, "tern", eos_ids), times[i]))
          for i in range(streams)]
    for t in ts:
        t.start()
    time.sleep(1.5)
    jt = []
    j0 = time.time()
    jb = {"prompt": long_prompt, "max_tokens": 4, "stream": True, "temperature": 0,
          "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(jb), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    first, prompt_tokens, buf = None, None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        if first is None and b'"text"' in buf:
            first = time.time()
        if b'"prompt_tokens"' in buf:
            try:
                tail = buf[buf.rindex(b'"prompt_tokens"'):]
                prompt_tokens = int(tail.split(b":")[1].split(b",")[0].split(b"}")[0])
            except ValueError:
                pass
    j1 = time.time()
    c.close()
    for t in ts:
        t.join()
    gaps = []
    for tm in times:
        gaps += [b - a for a, b in zip(tm, tm[1:]) if a >= j0 and b <= j1]
    gaps.sort()
    p = lambda q: gaps[min(len(gaps) - 1, int(q * len(gaps)))] if gaps else float("nan")  # noqa: E731
    return {"single_step_ms": step * 1e3, "join_prompt_tokens": prompt_tokens, "join_ttft_s": (first or j1) - j0,
            "gap_p50_ms": p(0.5) * 1e3, "gap_p99_ms": p(0.99) * 1e3, "gap_max_ms": (gaps[-1] if gaps else 0) * 1e3,
            "p99_over_step": p(0.99) / step, "gaps": len(gaps)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/bench-models/qwen3-0.46b")
    ap.add_argument("--gguf", default="/work/bench-models/qwen3-0.46b-f16.gguf")
    ap.add_argument("--llama-server", default=os.path.expanduser("~/.cache/tern-bench/llama.cpp/build/bin/llama-server"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--join-streams", type=int, default=4)
    ap.add_argument("--no-join", action="store_true")
    ap.add_argument("--no-llama", action="store_true")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    eos = cfg.get("eos_token_id", [])
    eos_ids = eos if isinstance(eos, list) else [eos]
    eos_ids += [151643, 151645] if cfg.get("vocab_size", 0) > 151645 else []
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; threads {a.threads}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    tern, tport = start_server(a.model, a.threads, "--max-batch", "16")
    res = {"tern": {}, "llama": {}}
    try:
        aggregate(tport, 1, 8, "tern", eos_ids)  # warm up
        for n in [int(x) for x in a.clients.split(",")]:
            for r in range(a.runs):
                order = ["tern", "llama"] if r % 2 == 0 else ["llama", "tern"]
                for kind in order:
                    if kind == "llama":
                        if a.no_llama:
                            continue
                        lp, lport = start_llama(a.llama_server, a.gguf, a.threads, n)
                        try:
                            aggregate(lport, 1, 8, "llama", eos_ids)
                            tps, tot = aggregate(lport, n, a.tokens, "llama", eos_ids)
                        finally:
                            stop(lp)
                    else:
                        tps, tot = aggregate(tport, n, a.tokens, "tern", eos_ids)
                    res[kind].setdefault(n, []).append(tps)
                    print(f"N={n:2d} run {r} {kind:5s}: {tps:7.1f} tok/s aggregate ({tot} tokens)", flush=True)
        t1 = max(res["tern"].get(1, [0])) or 1
        l1 = max(res["llama"].get(1, [0])) if res["llama"] else 0
        summary = {}
        for n in res["tern"]:
            tb = max(res["tern"][n])
            lb = max(res["llama"][n]) if n in res["llama"] else 0
            summary[n] = {"tern_tps": tb, "tern_x_single": tb / t1, "llama_tps": lb,
                          "llama_x_single": lb / l1 if l1 else 0, "tern_over_llama": tb / lb if lb else 0}
            print(f"N={n:2d}: tern {tb:7.1f} tok/s ({tb / t1:4.2f}x one stream) | llama-server {lb:7.1f} "
                  f"({(lb / l1) if l1 else 0:4.2f}x) | tern / llama-server {(tb / lb) if lb else 0:4.2f}", flush=True)
        out = {"summary": summary}
        if not a.no_join:
            prompts = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench",
                                                  "code_prompts_heldout.json")))
            text = ""
            for p in prompts:
                text += p
                if len(text) > 15000:
                    break
            j = join_test(tport, eos_ids, a.join_streams, text[:15000])
            print(f"join: {j['join_prompt_tokens']}-token prompt joins {a.join_streams} streams: single-stream step "
                  f"{j['single_step_ms']:.1f} ms, running gaps p50 {j['gap_p50_ms']:.1f} p99 {j['gap_p99_ms']:.1f} "
                  f"max {j['gap_max_ms']:.1f} ms (p99 = {j['p99_over_step']:.2f}x step, {j['gaps']} gaps), joiner "
                  f"TTFT {j['join_ttft_s']:.2f} s", flush=True)
            out["join"] = j
        print(json.dumps(out))
    finally:
        stop(tern)


if __name__ == "__main__":
    main()
