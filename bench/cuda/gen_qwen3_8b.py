#!/usr/bin/env python3
"""Writes a random-weight Qwen3-8B-shaped checkpoint (hidden 4096, 36 layers,
32 heads over 8 KV heads of 128, FFN 12288, vocab 151936, untied head, bf16,
16.4 GB) as a Hugging Face directory, for `tern bench --device cuda` on a GPU
machine. The tensor table and config are tests/gen/gen_bench_model.py's; the
values are drawn on the GPU with torch (N(0, 0.02), RMSNorm weights 1.0,
seeded per tensor), which makes the 8B model in seconds rather than numpy's
minutes. The model never leaves that machine.

    python3 bench/cuda/gen_qwen3_8b.py OUT_DIR [--layers 36]
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gen"))
import gen_bench_model as g  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="hidden 256, ffn 512, vocab 1024 (a check of the script)")
    a = ap.parse_args()
    shape = argparse.Namespace(hidden=4096, layers=a.layers, heads=32, kv_heads=8, head_dim=128, ffn=12288,
                               vocab=151936, untied=True, seed=a.seed, std=0.02)
    if a.tiny:
        shape.hidden, shape.heads, shape.kv_heads, shape.ffn, shape.vocab = 256, 2, 1, 512, 1024
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(a.out, exist_ok=True)
    table = g.shape_table(shape)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shp, _ in table:
        n = 1
        for s in shp:
            n *= s
        header[name] = {"dtype": "BF16", "shape": shp, "data_offsets": [off, off + 2 * n]}
        off += 2 * n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    gen = torch.Generator(device=dev)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for i, (name, shp, kind) in enumerate(table):
            if kind == "ones":
                t = torch.ones(shp, dtype=torch.bfloat16)
            else:
                gen.manual_seed(a.seed * 100003 + i)
                t = (torch.randn(shp, generator=gen, device=dev, dtype=torch.float32) * shape.std).to(torch.bfloat16)
            f.write(t.contiguous().cpu().view(torch.uint16).numpy().tobytes())
    cfg = g.config(shape)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print("wrote %s: %.2f GB" % (a.out, off / 1e9))


if __name__ == "__main__":
    main()
