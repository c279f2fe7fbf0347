#!/usr/bin/env python3
"""Generate MLX affine-quantized model fixtures with goldens computed by mlx-lm itself.

Output: tests/fixtures/mlx/<name>/ with
  config.json          as mlx-lm writes it (flat rope_theta style, "quantization" and
                       "quantization_config" sections, per-module overrides)
  model.safetensors    uint32 codes + scales + biases for every quantized module
  golden.json          prompt, greedy (24 ids, KV cache on), logits_shape, mlx / mlx-lm
                       versions, notes, bits per weight
  golden_logits.f32    float32 little-endian [T, vocab], every prompt position

Procedure: build the mlx-lm model class from the config, draw every weight N(0, 0.08)
(RMSNorm weights 1 + N(0, 0.1)), cast to the storage dtype, quantize with
mlx_lm.utils.quantize_model (the code path of `mlx_lm.convert -q`), save with
mlx_lm.utils.save_model / save_config. The goldens come from loading the saved directory
back with mlx_lm.utils.load_model, casting every floating parameter (scales, biases, norms)
to float32 (exact) and running the model in float32: mlx-lm's own logits on the same
quantized weights.

Needs mlx[cpu] and mlx-lm. Run from the repository root:
    python3 tests/gen/gen_mlx_goldens.py [--only NAME ...]
"""
import argparse
import json
import os
import shutil

import mlx.core as mx
import mlx.nn as nn
import mlx_lm
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import _get_classes, load_model, quantize_model, save_config, save_model

OUT_ROOT = os.path.join("tests", "fixtures", "mlx")
PROMPT20 = [328, 384, 353, 219, 207, 297, 389, 171, 312, 166, 505, 106, 86, 86, 133, 180,
            256, 432, 78, 401]
N_GREEDY = 24
DTYPES = {"bf16": mx.bfloat16, "f16": mx.float16, "f32": mx.float32}
DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}

BASE = {"bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": 512,
        "max_position_embeddings": 1024, "tie_word_embeddings": False}


def qwen3(**kw):
    c = dict(BASE, model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=32,
             rope_theta=1000000.0, rope_scaling=None)
    c.update(kw)
    return c


def llama(**kw):
    c = dict(BASE, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=16,
             attention_bias=False, mlp_bias=False, rope_theta=10000.0, rope_scaling=None)
    c.update(kw)
    return c


def qwen2(**kw):
    c = dict(BASE, model_type="qwen2", architectures=["Qwen2ForCausalLM"], rope_theta=1000000.0,
             rope_scaling=None)
    c.update(kw)
    return c


def qwen3_moe(**kw):
    c = dict(BASE, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], head_dim=16,
             rope_theta=10000.0, rope_scaling=None, num_experts=8, num_experts_per_tok=2,
             moe_intermediate_size=32, decoder_sparse_step=2, mlp_only_layers=[], norm_topk_prob=False)
    c.update(kw)
    return c


def fixtures():
    fx = []
    fx.append(dict(name="qwen3_tied_q4_g32", config=qwen3(tie_word_embeddings=True), dtype="bf16",
                   bits=4, group=32, seed=201,
                   notes="qwen3, tied embeddings: the quantized embedding is gathered by row and "
                         "is also the head. 4 bits, group 32, bf16 scales/biases."))
    fx.append(dict(name="qwen3_tied_q8_g64", config=qwen3(tie_word_embeddings=True), dtype="bf16",
                   bits=8, group=64, seed=202,
                   notes="qwen3, tied embeddings, 8 bits, group 64, bf16 scales/biases."))
    fx.append(dict(name="qwen3_q4_g128", dtype="bf16", bits=4, group=128, seed=203,
                   config=qwen3(hidden_size=128, intermediate_size=384, num_attention_heads=4,
                                num_key_value_heads=2, head_dim=32),
                   override={"mlp.down_proj": {"group_size": 128, "bits": 8}},
                   notes="qwen3, hidden 128 / ffn 384 so that group 128 divides every input "
                         "size; 4 bits, group 128, down_proj 8 bits group 128; untied head."))
    fx.append(dict(name="llama_mixed_f32", config=llama(), dtype="f32", bits=4, group=64, seed=204,
                   override={"mlp.down_proj": {"group_size": 32, "bits": 8},
                             "lm_head": {"group_size": 32, "bits": 8}},
                   keep_float=["model.layers.1.self_attn.k_proj", "model.layers.2.mlp.up_proj"],
                   notes="llama, float32 storage (float32 scales/biases); 4 bits group 64 by "
                         "default, down_proj and lm_head 8 bits group 32 (per-module entries), "
                         "layer 1 k_proj and layer 2 up_proj kept in float32 and mapped to false "
                         "in the config."))
    fx.append(dict(name="qwen2_q8_g32_f16", config=qwen2(), dtype="f16", bits=8, group=32, seed=205,
                   notes="qwen2 (q/k/v biases stay float), float16 storage: float16 scales and "
                         "biases; 8 bits, group 32."))
    fx.append(dict(name="qwen3_moe_q4_g32", config=qwen3_moe(), dtype="bf16", bits=4, group=32, seed=206,
                   override={"mlp.gate": {"group_size": 64, "bits": 8}},
                   notes="qwen3_moe, layers 1 and 3 sparse (decoder_sparse_step 2), 8 experts top 2, "
                         "norm_topk_prob false; mlx-lm stacks the experts (mlp.switch_mlp.*_proj "
                         "[experts, rows, cols]); 4 bits group 32, the router 8 bits group 64."))
    return fx


def init_weights(model, dtype, seed):
    rng = np.random.default_rng(seed)
    params = tree_flatten(model.parameters())
    new = []
    for name, p in params:
        if name.endswith("norm.weight"):
            v = 1.0 + 0.1 * rng.standard_normal(p.shape)
        else:
            v = 0.08 * rng.standard_normal(p.shape)
        new.append((name, mx.array(v.astype(np.float32)).astype(dtype)))
    model.update(tree_unflatten(new))
    mx.eval(model.parameters())


def make_fixture(fx):
    out = os.path.join(OUT_ROOT, fx["name"])
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = dict(fx["config"], torch_dtype=DTYPE_NAMES[fx["dtype"]])
    model_cls, args_cls = _get_classes(cfg)
    model = model_cls(args_cls.from_dict(cfg))
    init_weights(model, DTYPES[fx["dtype"]], fx["seed"])
    override = fx.get("override", {})
    keep = set(fx.get("keep_float", []))

    def predicate(path, module):
        if path in keep:
            return False
        for suffix, params in override.items():
            if path == suffix or path.endswith("." + suffix):
                return dict(params, mode="affine")
        return True

    model, qcfg = quantize_model(model, cfg, fx["group"], fx["bits"], quant_predicate=predicate)
    for p in keep:     # the way mixed recipes record modules left in float
        qcfg["quantization"][p] = False
    qcfg["quantization_config"] = qcfg["quantization"]
    bpw = mlx_lm.utils.compute_bits_per_weight(model)
    save_model(out, model)
    save_config(qcfg, os.path.join(out, "config.json"))
    idx = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(idx):
        os.remove(idx)   # one shard: the plain single-file layout

    # goldens: mlx-lm on the saved files, float32 compute
    ref, _ = load_model(__import__("pathlib").Path(out))
    ref.set_dtype(mx.float32)
    prompt = PROMPT20
    logits = ref(mx.array([prompt]))[0].astype(mx.float32)
    mx.eval(logits)
    cache = make_prompt_cache(ref)
    step = ref(mx.array([prompt]), cache=cache)[0, -1]
    greedy = []
    for _ in range(N_GREEDY):
        t = int(mx.argmax(step).item())
        greedy.append(t)
        step = ref(mx.array([[t]]), cache=cache)[0, -1]
    lg = np.array(logits, dtype=np.float32)
    lg.tofile(os.path.join(out, "golden_logits.f32"))
    golden = {"prompt": prompt, "greedy": greedy, "logits_shape": list(lg.shape),
              "logits_last": [round(float(v), 6) for v in lg[-1]],
              "mlx": mx.__version__, "mlx_lm": mlx_lm.__version__, "bits": fx["bits"],
              "group_size": fx["group"], "storage_dtype": fx["dtype"],
              "bits_per_weight_mlx": bpw, "notes": fx["notes"]}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"{fx['name']}: greedy {greedy[:6]}..., {bpw:.3f} bits per weight")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    for fx in fixtures():
        if a.only and fx["name"] not in a.only:
            continue
        make_fixture(fx)


if __name__ == "__main__":
    main()
