#!/usr/bin/env python3
"""Server speed against the engine: served decode tok/s vs `tern generate` on the
same prompt and token count, and time to first token for a 512-token prompt.

Both sides run in this process's run, same binary, same threads. The served
numbers are measured by a streaming client: decode tok/s = (tokens - 1) / (time
of last token - time of first token), the same definition `tern generate`
prints; TTFT = request sent -> first streamed token (HTTP, tokenization,
queueing and prefill included).

usage: bench/server_bench.py [--model DIR] [--tokens 256] [--threads N] [--runs 9]
"""
import argparse
import http.client
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import time

from serve_util import ROOT, TERN, start_server
PROMPT = "import numpy as np\nimport torch\n\n\nclass Trainer:\n    def __init__(self, model, optimizer):\n"


def stream(port, body):
    """Returns (ttft_s, decode_tok_s, completion_tokens, prompt_tokens)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    times, usage, buf, first_event = [], None, b"", None
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        now = time.perf_counter()
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: {"):
                continue
            d = json.loads(ev[6:])
            if first_event is None and d["choices"]:
                first_event = now
            if d["choices"] and d["choices"][0].get("text"):
                times.append(now)
            if d.get("usage"):
                usage = d["usage"]
    c.close()
    n = usage["completion_tokens"]
    decode = (n - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    return (times[0] if times else first_event) - t0, decode, n, usage["prompt_tokens"]


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l and not l.startswith("#")}


def engine(model, prompt, tokens, threads):
    cmd = [str(TERN), "generate", "--model", model, "--prompt", prompt, "--max-tokens", str(tokens),
           "--ignore-eos"] + (["--threads", str(threads)] if threads else [])
    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    m = re.search(r"prompt: (\d+) tokens, ([\d.]+) tok/s \| generation: (\d+) tokens, ([\d.]+) tok/s", err)
    return int(m[1]), float(m[2]), int(m[3]), float(m[4])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "tern-demo-code-17m"))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"machine: {cpu}, {os.cpu_count()} cpus, {platform.system()}; threads={a.threads or 'all'}")

    srv, port = start_server(a.model, a.threads)
    try:
        # EOS never ends the served run early (the engine side uses --ignore-eos).
        body = {"prompt": PROMPT, "max_tokens": a.tokens, "logit_bias": {"8187": -1000, "8185": -1000}}
        stream(port, {**body, "max_tokens": 8})  # warm-up
        served, gen, inside = [], [], []
        for i in range(a.runs):
            # Alternate which side goes first so that drift in the machine's load favours neither.
            if i % 2:
                gen.append(engine(a.model, PROMPT, a.tokens, a.threads))
            m0 = metrics(port)
            served.append(stream(port, body))
            m1 = metrics(port)
            dt = m1["tern_decode_seconds_total"] - m0["tern_decode_seconds_total"]
            inside.append((served[-1][2] - 1) / dt)
            if not i % 2:
                gen.append(engine(a.model, PROMPT, a.tokens, a.threads))
        s_dec = statistics.median(x[1] for x in served)
        g_dec = statistics.median(x[3] for x in gen)
        print(f"decode, {a.tokens} tokens, median of {a.runs}: served {s_dec:.1f} tok/s, "
              f"tern generate {g_dec:.1f} tok/s, ratio {s_dec / g_dec:.3f} "
              f"(engine loop inside the server: {statistics.median(inside):.1f} tok/s)")

        # A prompt of exactly 512 tokens: grow lines, then trim by the server's own count.
        lines = [f"    value_{i} = compute(data[{i}], scale={i % 7})\n" for i in range(200)]
        text = "def pipeline(data):\n" + "".join(lines)
        ptoks = stream(port, {"prompt": text, "max_tokens": 1})[3]
        while ptoks > 512:
            text = text[:-max(1, (ptoks - 512))]
            ptoks = stream(port, {"prompt": text, "max_tokens": 1})[3]
        ttfts, pre = [], []
        for _ in range(a.runs):
            ttfts.append(stream(port, {"prompt": text, "max_tokens": 2})[0])
            pre.append(engine(a.model, text, 1, a.threads))
        e_ttft = statistics.median(512 / x[1] for x in pre)
        print(f"TTFT, {ptoks}-token prompt, median of {a.runs}: served {statistics.median(ttfts) * 1000:.1f} ms, "
              f"tern generate prefill {e_ttft * 1000:.1f} ms")
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
