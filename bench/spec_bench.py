#!/usr/bin/env python3
"""Speculative decoding: tern's n-gram drafting against its plain decode on
held-out code prompts, one stream (tern generate --stats) and N concurrent
streams (tern serve with and without --draft-kind ngram), same run,
interleaved.

One stream: the first --prompts (8) files of ../shared/bench/code_prompts_heldout.json,
cut to --chars characters, --tokens (128) greedy tokens each; per prompt the
plain and the speculative run alternate; decode tok/s = (generated - 1) /
decode time as tern generate --stats reports it; the outputs are compared
(they must be identical). Streams: aggregate tok/s of N streaming clients
(bench/batch_bench.py's measure) with and without speculation.

usage: bench/spec_bench.py [--model DIR] [--threads 2] [--streams 1,2,4,8,16]
"""
import argparse
import json
import os
import subprocess
import time

from batch_bench import aggregate, stop
from serve_util import ROOT, start_server

HERE = os.path.dirname(os.path.abspath(__file__))


def gen(model, prompt, tokens, threads, spec):
    cmd = [str(ROOT / "build" / "tern"), "generate", "--model", model, "--prompt", prompt, "--max-tokens", str(tokens),
           "--ids-out", "--stats", "--threads", str(threads)]
    if spec:
        cmd += ["--draft-kind", "ngram", "--num-draft-tokens", str(spec)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    return p.stdout.strip(), stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT.parent / "shared" / "models" / "tern-demo-code-42m"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--chars", type=int, default=1500)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--draft", type=int, default=4)
    ap.add_argument("--streams", default="1,2,4,8,16")
    a = ap.parse_args()
    prompts = json.load(open(os.path.join(HERE, "..", "..", "shared", "bench", "code_prompts_heldout.json")))
    prompts = [p[:a.chars] for p in prompts[:a.prompts]]
    plain_t = spec_t = 0.0
    drafted = accepted = calls = toks = 0
    same = True
    for i, p in enumerate(prompts):
        order = [0, a.draft] if i % 2 == 0 else [a.draft, 0]
        out = {}
        for d in order:
            ids, st = gen(a.model, p, a.tokens, a.threads, d)
            out[d] = (ids, st)
        same &= out[0][0] == out[a.draft][0]
        n0, s0 = out[0][1]["generated_tokens"], out[0][1]
        s1 = out[a.draft][1]
        plain_t += (n0 - 1) / s0["decode_tps"]
        spec_t += (s1["generated_tokens"] - 1) / s1["decode_tps"]
        toks += n0 - 1
        drafted += s1["drafted"]
        accepted += s1["accepted"]
        calls += s1["target_calls"]
        print(f"prompt {i}: plain {s0['decode_tps']:.1f} tok/s, ngram {s1['decode_tps']:.1f} tok/s "
              f"({s1['accepted']}/{s1['drafted']} accepted, {s1['target_calls']} target calls), "
              f"same output: {out[0][0] == out[a.draft][0]}", flush=True)
    one = {"plain_tps": toks / plain_t, "ngram_tps": toks / spec_t, "speedup": plain_t / spec_t,
           "acceptance": accepted / drafted if drafted else 0, "identical": same}
    print(f"one stream: plain {one['plain_tps']:.1f} tok/s, ngram {one['ngram_tps']:.1f} tok/s = "
          f"{one['speedup']:.2f}x, acceptance {one['acceptance']:.2f}, identical outputs: {same}", flush=True)
    res = {"one_stream": one, "streams": {}}
    plain, pport = start_server(a.model, a.threads, "--max-batch", "16")
    spec, sport = start_server(a.model, a.threads, "--max-batch", "16", "--draft-kind", "ngram",
                               "--num-draft-tokens", str(a.draft))
    try:
        for n in [int(x) for x in a.streams.split(",")]:
            r = []
            for kind, port in (("plain", pport), ("ngram", sport)) if n % 2 else (("ngram", sport), ("plain", pport)):
                tps, _ = aggregate(port, n, a.tokens, "tern", [])
                r.append((kind, tps))
            d = dict(r)
            res["streams"][n] = {"plain_tps": d["plain"], "ngram_tps": d["ngram"], "ratio": d["ngram"] / d["plain"]}
            print(f"N={n:2d}: plain {d['plain']:.1f} tok/s, ngram {d['ngram']:.1f} tok/s = "
                  f"{d['ngram'] / d['plain']:.2f}x", flush=True)
    finally:
        stop(plain)
        stop(spec)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
