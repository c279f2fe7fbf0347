#!/usr/bin/env python3
"""Writes the CPU benchmark model: a 0.46B Qwen3-shaped bf16 model with random weights.

Shape: hidden 1024, 24 layers, 16 heads, 8 KV heads, head_dim 64, FFN 3072, vocab 151936,
tied embeddings (0.458B parameters). Output is a Hugging Face model directory (config.json,
model.safetensors in bf16, generation_config.json); if --tokenizer-dir is given, its
tokenizer.json and tokenizer_config.json are copied in (llama.cpp's converter needs them).

Only numpy is needed (the safetensors file is written directly). The weights are random and
deterministic for a given --seed; the model is for speed measurements only.

Usage: gen_bench_model_tmp.py OUT_DIR [--seed 0] [--tokenizer-dir DIR]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

HIDDEN = 1024
LAYERS = 24
HEADS = 16
KV_HEADS = 8
HEAD_DIM = 64
FFN = 3072
VOCAB = 151936


def config():
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": FFN,
        "max_position_embeddings": 40960,
        "max_window_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB,
    }


def tensor_shapes():
    """(name, shape, kind) in file order; kind is 'w' (random matrix) or 'norm' (ones)."""
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN), "w")]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (HIDDEN,), "norm"),
            (p + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN), "w"),
            (p + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "w"),
            (p + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "w"),
            (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM), "w"),
            (p + "self_attn.q_norm.weight", (HEAD_DIM,), "norm"),
            (p + "self_attn.k_norm.weight", (HEAD_DIM,), "norm"),
            (p + "post_attention_layernorm.weight", (HIDDEN,), "norm"),
            (p + "mlp.gate_proj.weight", (FFN, HIDDEN), "w"),
            (p + "mlp.up_proj.weight", (FFN, HIDDEN), "w"),
            (p + "mlp.down_proj.weight", (HIDDEN, FFN), "w"),
        ]
    out.append(("model.norm.weight", (HIDDEN,), "norm"))
    return out


def to_bf16_bits(x):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    return ((u + rounding) >> 16).astype(np.uint16)


def write_safetensors(path, rng):
    entries = tensor_shapes()
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape, _ in entries:
        nbytes = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    total_params = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for name, shape, kind in entries:
            n = int(np.prod(shape))
            total_params += n
            if kind == "norm":
                data = to_bf16_bits(np.ones(n, dtype=np.float32))
            else:
                data = to_bf16_bits(rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
            f.write(data.tobytes())
    return total_params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer-dir", default=None, help="dir with tokenizer.json and tokenizer_config.json")
    args = ap.parse_args()

    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config(), f, indent=2)
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643]}, f, indent=2)
    n = write_safetensors(os.path.join(args.out_dir, "model.safetensors"), rng)
    if args.tokenizer_dir:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(args.tokenizer_dir, name)
            if not os.path.isfile(src):
                print(f"gen_bench_model: missing {src}", file=sys.stderr)
                return 1
            dst = os.path.join(args.out_dir, name)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o644)
    print(f"wrote {args.out_dir}: {n} parameters ({n * 2 / 1e9:.3f} GB bf16)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
