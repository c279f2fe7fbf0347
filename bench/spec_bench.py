#!/usr/bin/env python3
"""Speculative decoding: tern's drafters against its plain decode and against
llama.cpp's speculative modes on the same model pair, same run, interleaved.

One stream: the first --prompts (8) of ../shared/bench/code_prompts_heldout.json,
cut to --chars characters, --tokens (128) greedy tokens each. Per prompt, in
turn: tern generate --stats plain, with the n-gram drafter and with the draft
model (decode tok/s = (generated - 1) / decode time; outputs compared, they must
be identical), then llama-server (one slot, -t THREADS) plain, with the draft
model (-md, --spec-draft-n-max K) and with n-gram lookup (--spec-type
ngram-simple, --spec-ngram-simple-size-m K) for each K in --llama-draft (4,8),
its decode tok/s from the reply's timings.predicted_per_second (llama-server
modes: -md with --spec-type draft-simple; ngram-simple with n = 3, ngram-mod
and ngram-map-k; the best of each kind is the baseline). Totals are
tokens / time over all prompts; each speculative mode is reported as a ratio to
the same engine's plain decode, and tern's as a ratio to llama.cpp's best K.

Streams: N concurrent streaming clients (N in --streams), each a held-out
prompt, --tokens greedy tokens; aggregate tok/s of tern serve plain, with the
n-gram drafter and with the draft model (one server each, --max-batch 16; the
-fixed modes draft at fixed depth), --stream-rounds rounds per N in alternating
order, each mode's median ratio to plain; with --llama-streams also
llama-server (-np = the largest N) plain, with the draft model and with
ngram-simple at --draft tokens, tokens counted from its non-streaming replies.

usage: bench/spec_bench.py [--model DIR] [--draft-model DIR] [--gguf F] [--gguf-draft F]
       [--threads 2] [--draft 4] [--fixed] [--llama-draft 4,8] [--streams 1,2,4,8,16] [--no-llama] [--no-streams]
       [--no-one-stream] [--stream-modes plain,ngram,model,ngram-fixed,model-fixed] [--stream-rounds R]
       [--llama-streams]
Prints one line per measurement and a final JSON object.
"""
import argparse
import http.client
import json
import os
import subprocess
import threading
import time

from batch_bench import start_llama, stop
from serve_util import ROOT, start_server

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ROOT.parent / "shared" / "models"
LLAMA = os.path.expanduser("~/.cache/tern-bench/llama.cpp/build/bin/llama-server")


def gen(a, prompt, kind):
    cmd = [str(ROOT / "build" / "tern"), "generate", "--model", a.model, "--prompt", prompt, "--max-tokens",
           str(a.tokens), "--ids-out", "--stats", "--threads", str(a.threads), "--ignore-eos"]
    if kind == "ngram":
        cmd += ["--draft-kind", "ngram", "--num-draft-tokens", str(a.draft)] + (["--draft-fixed"] if a.fixed else [])
    elif kind == "model":
        cmd += ["--draft-model", a.draft_model, "--num-draft-tokens", str(a.draft)] + (["--draft-fixed"] if a.fixed else [])
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return p.stdout.strip(), json.loads(p.stderr.strip().splitlines()[-1])


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data}")
    return data


def llama_once(port, prompt, tokens):
    r = post(port, "/completion", {"prompt": prompt, "n_predict": tokens, "temperature": 0, "top_k": 1,
                                   "ignore_eos": True, "cache_prompt": False})
    t = r["timings"]
    return t["predicted_n"], t["predicted_per_second"], t.get("draft_n", 0), t.get("draft_n_accepted", 0)


def stream_one(port, prompt, tokens, out, i):
    body = {"prompt": prompt, "max_tokens": tokens, "stream": True, "temperature": 0, "ignore_eos": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    n, last = 0, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("choices") and ev["choices"][0].get("text"):
            n += 1
            last = time.time()
    c.close()
    out[i] = (n, last)


def concurrent(n, one):
    """Runs one(i) -> (tokens, time of the last token) for i < n at once; aggregate tok/s from the
    start to the last token of all."""
    out = [None] * n

    def run(i):
        out[i] = one(i)

    t0 = time.time()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(o[0] for o in out) / (max(o[1] for o in out) - t0)


def aggregate(port, prompts, n, tokens):
    """tern serve: n concurrent streaming /v1/completions clients."""
    def one(i):
        got = [None]
        stream_one(port, prompts[i % len(prompts)], tokens, got, 0)
        return got[0]
    return concurrent(n, one)


def one_stream(a, prompts):
    """tern generate plain / n-gram / draft model against llama-server's modes, one prompt at a time."""
    # llama.cpp servers, one per mode, started once.
    llama = {}
    if not a.no_llama:
        ks = [int(k) for k in a.llama_draft.split(",")]
        modes = [("plain", [])]
        modes += [(f"model@{k}", ["-md", a.gguf_draft, "--spec-type", "draft-simple", "--spec-draft-n-max", str(k)])
                  for k in ks]
        modes += [(f"ngram-simple@{k}", ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                                         "--spec-ngram-simple-size-m", str(k)]) for k in ks]
        modes += [(f"ngram-mod@{k}", ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", str(k)]) for k in ks]
        modes += [("ngram-map-k", ["--spec-type", "ngram-map-k"])]
        for name, extra in modes:
            llama[name] = start_llama_mode(a, extra)

    tern_t = {"plain": 0.0, "ngram": 0.0, "model": 0.0}
    tern_acc = {"ngram": [0, 0, 0], "model": [0, 0, 0]}
    llama_t = {name: 0.0 for name in llama}
    llama_acc = {name: [0, 0] for name in llama}
    toks = 0
    same = True
    try:
        for i, p in enumerate(prompts):
            kinds = ["plain", "ngram", "model"] if i % 2 == 0 else ["model", "ngram", "plain"]
            out = {}
            for k in kinds:
                out[k] = gen(a, p, k)
            ok = out["plain"][0] == out["ngram"][0] == out["model"][0]
            same &= ok
            n = out["plain"][1]["generated_tokens"] - 1
            toks += n
            for k in kinds:
                tern_t[k] += n / out[k][1]["decode_tps"]
                if k != "plain":
                    st = out[k][1]
                    tern_acc[k][0] += st["drafted"]
                    tern_acc[k][1] += st["accepted"]
                    tern_acc[k][2] += st["target_calls"]
            line = " ".join(f"tern {k} {out[k][1]['decode_tps']:.1f}" for k in ("plain", "ngram", "model"))
            for name, (_, port) in (llama.items() if i % 2 else reversed(list(llama.items()))):
                pn, tps, dn, da = llama_once(port, p, a.tokens)
                llama_t[name] += (pn - 1) / tps if tps > 0 else 0
                llama_acc[name][0] += dn
                llama_acc[name][1] += da
                line += f" | llama {name} {tps:.1f}"
            print(f"prompt {i}: {line} tok/s; tern outputs identical: {ok}", flush=True)
    finally:
        for proc, _ in llama.values():
            stop(proc)
    one = {"identical": same}
    for k, t in tern_t.items():
        one[f"tern_{k}_tps"] = toks / t
    for k in ("ngram", "model"):
        d, acc, calls = tern_acc[k]
        one[f"tern_{k}_speedup"] = tern_t["plain"] / tern_t[k]
        one[f"tern_{k}_acceptance"] = acc / d if d else 0
        one[f"tern_{k}_tokens_per_call"] = (toks + len(prompts)) / calls if calls else 0
    print(f"one stream, tern: plain {one['tern_plain_tps']:.1f} tok/s, n-gram {one['tern_ngram_tps']:.1f} "
          f"({one['tern_ngram_speedup']:.2f}x), draft model {one['tern_model_tps']:.1f} "
          f"({one['tern_model_speedup']:.2f}x), identical outputs: {same}", flush=True)
    if llama:
        lt = {name: toks / t for name, t in llama_t.items() if t > 0}
        one["llama"] = lt
        for kind in ("ngram", "model"):
            best = max((v, name) for name, v in lt.items() if name.startswith(kind))
            one[f"llama_{kind}_best"] = best[1]
            one[f"llama_{kind}_drafted_accepted"] = llama_acc[best[1]]
            one[f"llama_{kind}_speedup"] = best[0] / lt["plain"]
            one[f"tern_{kind}_vs_llama_best"] = one[f"tern_{kind}_tps"] / best[0]
        one["tern_plain_vs_llama_plain"] = one["tern_plain_tps"] / lt["plain"]
        print("one stream, llama.cpp: " + ", ".join(f"{n} {v:.1f}" for n, v in lt.items()) + " tok/s", flush=True)
        print(f"tern / llama.cpp: plain {one['tern_plain_vs_llama_plain']:.2f}x, n-gram "
              f"{one['tern_ngram_vs_llama_best']:.2f}x (llama {one['llama_ngram_best']}), draft model "
              f"{one['tern_model_vs_llama_best']:.2f}x (llama {one['llama_model_best']})", flush=True)
    return one


def streams(a, prompts):
    """Aggregate tok/s at N concurrent clients: tern serve per mode (and llama-server with
    --llama-streams), --stream-rounds rounds per N in alternating order, median ratios."""
    out = {}
    common = ("--max-batch", "16", "--prompt-cache-bytes", "0")
    spec = {"ngram": ("--draft-kind", "ngram", "--num-draft-tokens", str(a.draft)),
            "model": ("--draft-model", a.draft_model, "--num-draft-tokens", str(a.draft))}
    modes = [m for m in a.stream_modes.split(",") if m]
    servers, lservers = {}, {}
    try:
        for m in modes:
            kind, _, fixed = m.partition("-")
            extra = () if kind == "plain" else spec[kind] + (("--draft-fixed",) if fixed or a.fixed else ())
            servers[m] = start_server(a.model, a.threads, *common, *extra)
        if a.llama_streams:
            nmax = max(int(x) for x in a.streams.split(","))
            lmodes = {"llama-plain": [],
                      "llama-model": ["-md", a.gguf_draft, "--spec-type", "draft-simple", "--spec-draft-n-max",
                                      str(a.draft)],
                      "llama-ngram": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                                      "--spec-ngram-simple-size-m", str(a.draft)]}
            for name, extra in lmodes.items():
                lservers[name] = start_llama(a.llama_server, a.gguf, a.threads, nmax, nmax * 1024, extra)
        for n in [int(x) for x in a.streams.split(",")]:
            runs = {k: [] for k in list(servers) + list(lservers)}
            for rnd in range(a.stream_rounds):
                order = list(servers) + list(lservers)
                if (n + rnd) % 2:
                    order.reverse()
                for k in order:
                    if k in servers:
                        runs[k].append(aggregate(servers[k][1], prompts, n, a.tokens))
                    else:
                        runs[k].append(aggregate_plain(lservers[k][1], prompts, n, a.tokens))
            row = {f"{k}_tps": sorted(v)[len(v) // 2] for k, v in runs.items()}
            line = f"N={n:2d}:"
            for group, base in ((servers, "plain"), (lservers, "llama-plain")):
                if base not in group:
                    continue
                for k in group:
                    if k == base:
                        continue
                    ratios = sorted(x / y for x, y in zip(runs[k], runs[base]))
                    row[f"{k}_ratio"] = ratios[len(ratios) // 2]
                    row[f"{k}_ratio_min"] = ratios[0]
                    line += f" {k} {ratios[len(ratios) // 2]:.2f}x (min {ratios[0]:.2f}x)"
            line += " | tok/s " + ", ".join(f"{k} {row[f'{k}_tps']:.1f}" for k in runs)
            out[n] = row
            print(line, flush=True)
    finally:
        for proc, _ in list(servers.values()) + list(lservers.values()):
            stop(proc)
    return out


def aggregate_plain(port, prompts, n, tokens):
    """llama-server: n concurrent non-streaming /completion requests (a speculative llama-server
    may put several tokens in one stream chunk, so tokens are counted from its replies)."""
    def one(i):
        r = post(port, "/completion", {"prompt": prompts[i % len(prompts)], "n_predict": tokens,
                                       "temperature": 0, "top_k": 1, "ignore_eos": True, "cache_prompt": False})
        return r["timings"]["predicted_n"], time.time()
    return concurrent(n, one)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(MODELS / "tern-demo-code-42m"))
    ap.add_argument("--draft-model", default=str(MODELS / "tern-demo-code-draft-4m"))
    ap.add_argument("--gguf", default="/work/bench-models/demo-42m-f16.gguf")
    ap.add_argument("--gguf-draft", default="/work/bench-models/demo-draft-4m-f16.gguf")
    ap.add_argument("--llama-server", default=LLAMA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--chars", type=int, default=1500)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--draft", type=int, default=4)
    ap.add_argument("--llama-draft", default="4,8")
    ap.add_argument("--streams", default="1,2,4,8,16")
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--no-streams", action="store_true")
    ap.add_argument("--fixed", action="store_true", help="tern drafts at fixed depth (--draft-fixed)")
    ap.add_argument("--no-one-stream", action="store_true", help="skip the one-stream comparison")
    ap.add_argument("--stream-modes", default="plain,ngram,model",
                    help="tern servers at N streams: plain, ngram, model, ngram-fixed, model-fixed")
    ap.add_argument("--stream-rounds", type=int, default=1, help="rounds per N (median ratio reported)")
    ap.add_argument("--llama-streams", action="store_true",
                    help="also llama-server (-np = the largest N) plain, draft model and ngram-simple")
    a = ap.parse_args()
    prompts = json.load(open(os.path.join(HERE, "..", "..", "shared", "bench", "code_prompts_heldout.json")))
    prompts = [p[:a.chars] for p in prompts[:a.prompts]]
    res = {"threads": a.threads, "tokens": a.tokens, "tern_draft": a.draft, "fixed": a.fixed}

    if not a.no_one_stream:
        res["one_stream"] = one_stream(a, prompts)

    if not a.no_streams:
        res["streams"] = streams(a, prompts)
    print(json.dumps(res))


def start_llama_mode(a, extra):
    """llama-server with one slot and the given speculative flags."""
    return start_llama(a.llama_server, a.gguf, a.threads, 1, 4096, extra)


if __name__ == "__main__":
    main()
