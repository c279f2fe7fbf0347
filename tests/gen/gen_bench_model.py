#!/usr/bin/env python3
"""Write the random-weight Qwen3-shaped benchmark model as a Hugging Face directory.

Shape (the speed target of the engine): hidden 1024, 24 layers, 16 heads, 8 KV heads,
head_dim 64, FFN 3072, vocab 151936, q/k RMSNorm, rope_theta 1e6, bf16 weights drawn
N(0, 0.02) (RMSNorm weights are 1.0). Embeddings are tied by default, which gives the
0.46B parameters of the target (457.6M; untied it would be 613.2M): pass --untied for a
separate lm_head.

Output (default /work/bench-models/qwen3-0.46b, outside the repository):
  config.json             old flat Qwen3 style (rope_theta), as the released checkpoints
  generation_config.json
  model.safetensors       one file, ~0.92 GB
  tokenizer.json, tokenizer_config.json   copied from ../shared/fixtures/tokenizers/qwen3
                                          when present (needed by llama.cpp's converter)

Only numpy and the standard library are used; tensors are generated and written in
chunks of a few million values, so peak memory stays around 100 MB. Deterministic:
tensor i is drawn from numpy default_rng([seed, i]).

    python3 tests/gen/gen_bench_model.py [OUT_DIR] [--seed 0] [--untied] [--layers 24]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

CHUNK = 1 << 22  # values per generated chunk


def shape_table(a):
    H, L, V = a.hidden, a.layers, a.vocab
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    t = [("model.embed_tokens.weight", [V, H], "normal")]
    for i in range(L):
        p = "model.layers.%d." % i
        t += [(p + "input_layernorm.weight", [H], "ones"),
              (p + "self_attn.q_proj.weight", [q, H], "normal"),
              (p + "self_attn.k_proj.weight", [kv, H], "normal"),
              (p + "self_attn.v_proj.weight", [kv, H], "normal"),
              (p + "self_attn.o_proj.weight", [H, q], "normal"),
              (p + "self_attn.q_norm.weight", [a.head_dim], "ones"),
              (p + "self_attn.k_norm.weight", [a.head_dim], "ones"),
              (p + "post_attention_layernorm.weight", [H], "ones"),
              (p + "mlp.gate_proj.weight", [a.ffn, H], "normal"),
              (p + "mlp.up_proj.weight", [a.ffn, H], "normal"),
              (p + "mlp.down_proj.weight", [H, a.ffn], "normal")]
    t.append(("model.norm.weight", [H], "ones"))
    if a.untied:
        t.append(("lm_head.weight", [V, H], "normal"))
    return t


def f32_to_bf16(x):
    """Round-to-nearest-even float32 -> bfloat16 bits (no NaNs in N(0, s) data)."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def config(a):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": a.head_dim,
        "hidden_act": "silu",
        "hidden_size": a.hidden,
        "initializer_range": 0.02,
        "intermediate_size": a.ffn,
        "max_position_embeddings": 40960,
        "max_window_layers": a.layers,
        "model_type": "qwen3",
        "num_attention_heads": a.heads,
        "num_hidden_layers": a.layers,
        "num_key_value_heads": a.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": not a.untied,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": a.vocab,
    }


def write_model(a, path):
    table = shape_table(a)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in table:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for idx, (name, shape, kind) in enumerate(table):
            n = int(np.prod(shape))
            if kind == "ones":
                f.write(np.full(n, 0x3F80, dtype=np.uint16).tobytes())
                continue
            rng = np.random.default_rng([a.seed, idx])
            left = n
            while left:
                k = min(left, CHUNK)
                x = rng.standard_normal(k, dtype=np.float32)
                x *= np.float32(a.std)
                f.write(f32_to_bf16(x).tobytes())
                left -= k
    os.replace(tmp, path)
    return sum(int(np.prod(s)) for _, s, _ in table), off


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="random-weight Qwen3-shaped benchmark model")
    ap.add_argument("out", nargs="?", default="/work/bench-models/qwen3-0.46b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--untied", action="store_true", help="separate lm_head.weight")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "..", "..", "shared", "fixtures",
                                                        "tokenizers", "qwen3"))
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config(a), f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                   "pad_token_id": 151643, "do_sample": False}, f, indent=2)
    for t in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(a.tokenizer, t)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(a.out, t))
    params, nbytes = write_model(a, os.path.join(a.out, "model.safetensors"))
    print("%s: %d parameters (%.3fB), %d weight bytes, tied=%s" % (
        a.out, params, params / 1e9, nbytes, not a.untied))
    return 0


if __name__ == "__main__":
    sys.exit(main())
