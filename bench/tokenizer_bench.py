#!/usr/bin/env python3
"""Tokenizer speed: tern versus the `tokenizers` package, same corpus, same run.

    python3 bench/tokenizer_bench.py [--tern build/tern] [--repeat 3]

Encode throughput: every line of tests/goldens/tokenizer/corpus.jsonl encoded
one call at a time (add_special=True), single-threaded on both sides
(TOKENIZERS_PARALLELISM=false); tern's time is its own encode time as printed by
`tern tokenize --jsonl --time` (JSON parsing and printing excluded), the
reference's is the loop of Tokenizer.encode calls. Load: tokenizer.json to a
ready tokenizer (`--time` load line for tern, Tokenizer.from_file for the
reference). Best of --repeat runs for each. Prints one line per tokenizer and
the ratios (>1 means tern is faster)."""
import argparse, json, os, platform, re, subprocess, time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODELS = {
    "qwen3": os.path.join(SHARED, "fixtures/tokenizers/qwen3"),
    "gemma3": os.path.join(SHARED, "fixtures/tokenizers/gemma3"),
    "llama3": os.path.join(SHARED, "fixtures/tokenizers/llama3"),
    "demo": os.path.join(SHARED, "models/tern-demo-code-17m"),
}


def cpu_name():
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", default=os.path.join(ROOT, "build", "tern"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", default=os.path.join(ROOT, "tests/goldens/tokenizer/corpus.jsonl"))
    a = ap.parse_args()
    from tokenizers import Tokenizer
    import tokenizers
    texts = [json.loads(l)["text"] for l in open(a.corpus, encoding="utf-8")]
    nbytes = sum(len(t.encode()) for t in texts)
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    print(f"machine: {cpu_name()}, {os.cpu_count()} cpus; tokenizers {tokenizers.__version__}; "
          f"corpus {len(texts)} lines, {nbytes} bytes")
    for name, d in MODELS.items():
        if not os.path.exists(os.path.join(d, "tokenizer.json")):
            continue
        ref_enc = ref_load = tern_enc = tern_load = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            ref_load = min(ref_load, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for t in texts:
                tok.encode(t)
            ref_enc = min(ref_enc, time.perf_counter() - t0)
            p = subprocess.run([a.tern, "tokenize", "--model", d, "--jsonl", "--time"], input=inp,
                               capture_output=True, check=True)
            err = p.stderr.decode()
            tern_enc = min(tern_enc, float(re.search(r"encode: ([0-9.]+) s", err).group(1)))
            tern_load = min(tern_load, float(re.search(r"load: ([0-9.]+) s", err).group(1)))
        print(f"{name:7s} encode: tern {nbytes / tern_enc / 1e6:6.2f} MB/s, tokenizers {nbytes / ref_enc / 1e6:6.2f} MB/s,"
              f" ratio {ref_enc / tern_enc:5.2f}x | load: tern {tern_load:.3f} s, tokenizers {ref_load:.3f} s")


if __name__ == "__main__":
    main()
