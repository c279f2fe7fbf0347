#!/usr/bin/env python3
"""Prompt cache: time to first token of turn 2 of a ~3k-token conversation
against its cold prefill, after a restart (tern --prompt-cache-dir), and the
prompt tokens actually computed by 8 agents sharing a ~2k-token system prompt;
tern serve and llama-server on the same weights, same run, same threads.

TTFT = time from sending a streamed /v1/chat/completions request to its first
content event. Cold = a prompt neither server has seen. Turn 2 = the same
conversation plus the assistant's reply and one more short user message.
Computed prompt tokens: tern reports usage.prompt_tokens_details.cached_tokens;
llama-server reports timings.prompt_n (tokens it evaluated).

usage: bench/prompt_cache_bench.py --model DIR --gguf FILE [--threads 2]
"""
import argparse
import http.client
import json
import os
import shutil
import tempfile
import threading
import time

from batch_bench import start_llama, stop
from serve_util import start_server

HERE = os.path.dirname(os.path.abspath(__file__))


def stream_chat(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, stream=True,
              stream_options={"include_usage": True})), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:300]
    first, text, usage, timings, buf = None, "", None, None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                continue
            d = json.loads(ev[6:])
            usage = d.get("usage") or usage
            timings = d.get("timings") or timings
            for ch in d.get("choices") or []:
                piece = ch.get("delta", {}).get("content")
                if piece:
                    if first is None:
                        first = time.time()
                    text += piece
    c.close()
    return (first or time.time()) - t0, text, usage, timings


def computed(usage, timings):
    if timings and "prompt_n" in timings:
        return timings["prompt_n"]
    if usage:
        return usage["prompt_tokens"] - (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return None


def conversation(prompts, chars):
    text = ""
    for p in prompts:
        text += p + "\n\n"
        if len(text) > chars:
            break
    return text[:chars]


def scenario(port, kind, prompts, label):
    doc = conversation(prompts, 11000) + f"\n# {label}\n"
    base = {"max_tokens": 8, "temperature": 0}
    if kind == "llama":
        base["cache_prompt"] = True
    m1 = [{"role": "user", "content": "Review this code:\n" + doc}]
    cold, reply, u1, t1 = stream_chat(port, dict(base, messages=m1))
    m2 = m1 + [{"role": "assistant", "content": reply}, {"role": "user", "content": "Now one more line."}]
    warm, _, u2, t2 = stream_chat(port, dict(base, messages=m2))
    return {"cold_ttft_s": cold, "turn2_ttft_s": warm, "turn2_over_cold": warm / cold,
            "prompt_tokens": (u1 or {}).get("prompt_tokens"), "turn2_computed": computed(u2, t2), "m2": m2, "base": base}


def agents(port, kind, prompts, n=8):
    system = conversation(prompts[10:], 7500)
    base = {"max_tokens": 4, "temperature": 0}
    if kind == "llama":
        base["cache_prompt"] = True
    out = [None] * n

    def run(i):
        msgs = [{"role": "system", "content": "You are a code reviewer. Reference:\n" + system},
                {"role": "user", "content": f"Question {i}: what does function number {i} do?"}]
        out[i] = stream_chat(port, dict(base, messages=msgs))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
        time.sleep(0.05)
    for t in ts:
        t.join()
    total = sum(o[2]["prompt_tokens"] for o in out if o[2])
    comp = sum(computed(o[2], o[3]) or 0 for o in out)
    return {"agents": n, "prompt_tokens_sum": total, "computed": comp, "computed_frac": comp / total if total else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/bench-models/qwen3-0.46b")
    ap.add_argument("--gguf", default="/work/bench-models/qwen3-0.46b-f16.gguf")
    ap.add_argument("--llama-server", default=os.path.expanduser("~/.cache/tern-bench/llama.cpp/build/bin/llama-server"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-llama", action="store_true")
    a = ap.parse_args()
    prompts = json.load(open(os.path.join(HERE, "..", "..", "shared", "bench", "code_prompts_heldout.json")))
    res = {}
    cache_dir = tempfile.mkdtemp(prefix="tern-pcache-bench-")
    try:
        tern, port = start_server(a.model, a.threads, "--prompt-cache-dir", cache_dir)
        try:
            s = scenario(port, "tern", prompts, "tern")
            res["tern"] = {k: v for k, v in s.items() if k not in ("m2", "base")}
            res["tern_agents"] = agents(port, "tern", prompts)
        finally:
            stop(tern)
        tern, port = start_server(a.model, a.threads, "--prompt-cache-dir", cache_dir)
        try:
            t, _, u, _ = stream_chat(port, dict(s["base"], messages=s["m2"]))
            res["tern"]["restart_ttft_s"] = t
            res["tern"]["restart_over_cold"] = t / res["tern"]["cold_ttft_s"]
            res["tern"]["restart_computed"] = computed(u, None)
        finally:
            stop(tern)
        if not a.no_llama:
            lp, lport = start_llama(a.llama_server, a.gguf, a.threads, 8, 8 * 4096)
            try:
                s = scenario(lport, "llama", prompts, "llama")
                res["llama"] = {k: v for k, v in s.items() if k not in ("m2", "base")}
                res["llama_agents"] = agents(lport, "llama", prompts)
            finally:
                stop(lp)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    for k, v in res.items():
        print(k, json.dumps(v))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
