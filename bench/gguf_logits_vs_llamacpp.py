#!/usr/bin/env python3
"""Logits and greedy continuation of tern against llama.cpp (llama-cpp-python) on the same GGUF.

    python3 bench/gguf_logits_vs_llamacpp.py FILE.gguf [FILE.gguf ...] [--tokens 64] [--greedy 32]

For each file: a prompt of --tokens ids (a fixed pseudo-random draw from the vocabulary), every
position's logits from llama.cpp (Llama(logits_all=True)) and from `tern logits --all` at both
precisions (f32: the reference path; bf16: the default fast path), then --greedy greedy tokens
from each. Prints max |logit difference|, mean |difference|, top-1 agreement over the positions,
and the length of the common greedy prefix. llama.cpp rounds activations (Q8_0 / Q8_K for
quantized products), so the differences are not expected to reach float32 agreement.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--greedy", type=int, default=32)
    ap.add_argument("--tern", default=os.path.join(ROOT, "build", "tern"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    from llama_cpp import Llama
    print("| file | precision | max abs diff | mean abs diff | top-1 agreement | greedy common prefix |")
    print("|---|---|---:|---:|---:|---:|")
    for f in a.files:
        llm = Llama(model_path=f, logits_all=True, n_ctx=a.tokens + a.greedy + 8, n_batch=a.tokens,
                    n_threads=a.threads, verbose=False)
        vocab = llm.n_vocab()
        rng = np.random.default_rng(7)
        ids = [int(x) for x in rng.integers(100, min(vocab, 150000), size=a.tokens)]
        llm.eval(ids)
        want = np.array(llm.scores[:a.tokens], dtype=np.float32)
        greedy = []
        t = int(np.argmax(want[-1]))
        for _ in range(a.greedy):
            greedy.append(t)
            llm.eval([t])
            t = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1])))
        del llm
        for prec in ("f32", "bf16"):
            with tempfile.NamedTemporaryFile(suffix=".f32") as out:
                subprocess.run([a.tern, "logits", "--model", f, "--ids", ",".join(map(str, ids)), "--all",
                                "--out", out.name, "--precision", prec, "--threads", str(a.threads)], check=True)
                got = np.fromfile(out.name, dtype=np.float32).reshape(a.tokens, -1)
            r = subprocess.run([a.tern, "generate", "--model", f, "--ids", ",".join(map(str, ids)), "--max-tokens",
                                str(a.greedy), "--temperature", "0", "--ids-out", "--ignore-eos", "--precision", prec,
                                "--threads", str(a.threads)], check=True, capture_output=True, text=True)
            tg = [int(x) for x in r.stdout.strip().split(",")]
            k = 0
            while k < len(greedy) and k < len(tg) and tg[k] == greedy[k]:
                k += 1
            d = np.abs(got - want)
            print(f"| {os.path.basename(f)} | {prec} | {d.max():.4f} | {d.mean():.5f} | "
                  f"{(got.argmax(1) == want.argmax(1)).mean():.3f} | {k} / {len(greedy)} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
