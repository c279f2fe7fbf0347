#!/usr/bin/env python3
"""Generate tiny random-weight model fixtures with golden logits for parity tests.

Output: tests/fixtures/models/<name>/ with
  config.json              written literally (old flat rope_theta/rope_scaling style or the
                           transformers-5 rope_parameters style, depending on the fixture)
  generation_config.json
  model.safetensors        (or model.safetensors.index.json + shards), BF16 unless noted
  golden.json              prompt, greedy (24 ids, KV cache on), logits_shape, logits_last,
                           transformers version, notes, and the rope values actually used
  golden_logits.f32        float32 little-endian [T, vocab], every prompt position

Procedure (the same as ../shared/fixtures/models): build the model in float32, draw every
weight N(0, 0.08) (RMSNorm weights 1 + N(0, 0.1)), cast the whole module to the storage
dtype with `.to(dtype)` (this rounds the weights AND the non-persistent RoPE `inv_freq`
buffer), save, cast back with `.float()` and compute in float32. The reference therefore
uses inv_freq rounded to the storage dtype (bf16 for most fixtures); golden.json records the
exact inv_freq values used and how far the logits move with an unrounded float32 inv_freq.

Every fixture is reloaded from disk with from_pretrained after writing: the reloaded model
must reproduce the goldens, which proves the literal config.json (old-style keys included)
is read by transformers the way the generator meant.

Needs torch (CPU) and transformers. Run from the repository root:
    python3 tests/gen/gen_model_goldens.py [--only NAME ...]
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

OUT_ROOT = os.path.join("tests", "fixtures", "models")
# Same 20-token prompt as the shared fixtures.
PROMPT20 = [328, 384, 353, 219, 207, 297, 389, 171, 312, 166, 505, 106, 86, 86, 133, 180,
            256, 432, 78, 401]
N_GREEDY = 24
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}

BASE = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
        "vocab_size": 512, "max_position_embeddings": 1024, "tie_word_embeddings": False,
        "initializer_range": 0.02, "attention_dropout": 0.0, "use_cache": True}


def llama_cfg(**kw):
    c = dict(BASE, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=16,
             attention_bias=False, mlp_bias=False, pretraining_tp=1,
             rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
    c.update(kw)
    return c


def qwen3_cfg(**kw):
    c = dict(BASE, model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=32,
             attention_bias=False, max_window_layers=28, sliding_window=None,
             use_sliding_window=False,
             rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
    c.update(kw)
    return c


def long_prompt(n, seed):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(3, 512, size=n)]


def old_style(cfg):
    """Rewrite a rope_parameters config into the pre-transformers-5 flat style."""
    c = copy.deepcopy(cfg)
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    c["rope_scaling"] = rp if rp.get("rope_type", rp.get("type")) != "default" else None
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    return c


# Each fixture: name, config dict as written (style already applied), storage dtype,
# prompt, notes, optional seed/shards. "build_config" is what the model is built from
# (always parsed by transformers from the literal file, see make_fixture).
def fixtures():
    fx = []

    qwen2 = dict(BASE, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                 max_window_layers=2, sliding_window=16, use_sliding_window=False,
                 rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
    qwen2_old = old_style(qwen2)
    fx.append(dict(name="qwen2", config=qwen2_old, dtype="bf16", prompt=PROMPT20, seed=101,
                   notes="qwen2: q/k/v projections carry biases (always on for qwen2; the config has no "
                         "attention_bias key), o_proj has none. Old flat config style: rope_theta + "
                         "rope_scaling null, torch_dtype. sliding_window=16 is present but "
                         "use_sliding_window=false, so attention is full causal over all 20 positions."))
    fx.append(dict(name="qwen2_sharded", config=qwen2_old, dtype="bf16", prompt=PROMPT20, seed=101,
                   shards=2,
                   notes="Same weights, config and goldens as qwen2, written as "
                         "model.safetensors.index.json + 2 shards by transformers save_pretrained."))

    fx.append(dict(name="qwen3_tied", config=qwen3_cfg(tie_word_embeddings=True), dtype="bf16",
                   prompt=PROMPT20, seed=102,
                   notes="qwen3 with tie_word_embeddings=true: the file has no lm_head.weight; logits = "
                         "final_norm(h) @ model.embed_tokens.weight^T."))

    l3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
    l3_cfg = old_style(llama_cfg(max_position_embeddings=256,
                                 rope_parameters=dict(rope_theta=10000.0, rope_type="llama3", **l3)))
    fx.append(dict(name="llama_rope_llama3", config=l3_cfg, dtype="bf16", prompt=PROMPT20, seed=103,
                   notes="llama3 rope scaling, old flat style (rope_theta + rope_scaling with key "
                         "rope_type). original_max_position_embeddings=16 so with head_dim 16 the "
                         "frequencies fall in all three bands (kept, smoothed, divided by factor)."))
    l3_cfg_type = copy.deepcopy(l3_cfg)
    l3_cfg_type["rope_scaling"] = {"type": "llama3", **l3}
    fx.append(dict(name="llama_rope_llama3_long", config=l3_cfg_type, dtype="bf16",
                   prompt=long_prompt(200, 7), seed=103,
                   notes="Same weights as llama_rope_llama3 but rope_scaling uses the legacy key "
                         "'type' instead of 'rope_type'; 200-token prompt, golden_logits is [200, 512]."))

    fx.append(dict(name="llama_rope_linear",
                   config=llama_cfg(rope_parameters={"rope_theta": 10000.0, "rope_type": "linear",
                                                     "factor": 4.0}),
                   dtype="bf16", prompt=long_prompt(64, 8), seed=104,
                   notes="linear rope scaling (factor 4) in transformers-5 rope_parameters style: "
                         "inv_freq = theta^(-2i/d) / factor. 64-token prompt."))

    yarn_cfg = old_style(qwen3_cfg(max_position_embeddings=128,
                                   rope_parameters={"rope_theta": 10000.0, "rope_type": "yarn",
                                                    "factor": 4.0,
                                                    "original_max_position_embeddings": 32}))
    yarn_cfg["rope_scaling"] = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    fx.append(dict(name="qwen3_rope_yarn", config=yarn_cfg, dtype="bf16", prompt=long_prompt(100, 9),
                   seed=105,
                   notes="yarn rope scaling written as Qwen model cards do (old style, key 'type'): "
                         "factor 4, original_max_position_embeddings 32, beta_fast/beta_slow default "
                         "32/1, truncate default true. attention_factor = 0.1*ln(4)+1 multiplies cos "
                         "AND sin, so q.k scores scale by attention_factor^2. 100-token prompt."))

    yarn2 = qwen3_cfg(max_position_embeddings=128,
                      rope_parameters={"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 32, "beta_fast": 16.0,
                                       "beta_slow": 2.0, "mscale": 1.0, "mscale_all_dim": 0.5,
                                       "truncate": False})
    fx.append(dict(name="qwen3_rope_yarn_params", config=yarn2, dtype="bf16", prompt=long_prompt(100, 10),
                   seed=106,
                   notes="yarn in rope_parameters style with every optional field: beta_fast 16, "
                         "beta_slow 2, truncate false (no floor/ceil of the correction range), mscale 1 "
                         "and mscale_all_dim 0.5 (attention_factor = (0.1*1*ln4+1)/(0.1*0.5*ln4+1)). "
                         "100-token prompt."))

    moe = dict(BASE, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], head_dim=16,
               attention_bias=False, decoder_sparse_step=2, mlp_only_layers=[],
               moe_intermediate_size=32, norm_topk_prob=False, num_experts=8,
               num_experts_per_tok=2, output_router_logits=False, router_aux_loss_coef=0.001,
               sliding_window=None, use_sliding_window=False, max_window_layers=4,
               rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
    fx.append(dict(name="qwen3_moe_sparse2", config=moe, dtype="bf16", prompt=PROMPT20, seed=107,
                   notes="qwen3_moe with decoder_sparse_step=2 and mlp_only_layers=[]: layers 1 and 3 "
                         "are MoE ((i+1) % 2 == 0), layers 0 and 2 dense MLP (intermediate_size 128). "
                         "norm_topk_prob=false: expert weights are the top-2 of softmax over all 8 "
                         "router logits, NOT renormalised. Expert count given as 'num_experts' (the key "
                         "real Qwen3-MoE configs use; transformers saves 'num_local_experts')."))

    hd = llama_cfg(head_dim=32, eos_token_id=[2, 5])
    fx.append(dict(name="llama_headdim32_eoslist", config=hd, dtype="bf16", prompt=PROMPT20, seed=108,
                   gen_eos=[2, 5],
                   notes="llama with explicit head_dim 32 != hidden/heads (16): q_proj [128,64], "
                         "k/v_proj [64,64], o_proj [64,128]; attention scale 1/sqrt(32). eos_token_id is "
                         "a list [2, 5] in config.json and generation_config.json."))

    fx.append(dict(name="qwen3_f16", config=qwen3_cfg(), dtype="f16", prompt=PROMPT20, seed=109,
                   notes="qwen3 stored as F16 (weights drawn in float32 and rounded to float16; the "
                         "reference rope inv_freq is rounded to float16 too)."))
    fx.append(dict(name="llama_f32", config=llama_cfg(), dtype="f32", prompt=PROMPT20, seed=110,
                   notes="llama stored as F32 (unrounded float32 weights; inv_freq not rounded)."))
    return fx


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


def rope_module(model):
    return model.model.rotary_emb


def forward_all(model, prompt):
    with torch.no_grad():
        return model(torch.tensor([prompt])).logits[0].float().numpy()


def greedy(model, prompt):
    ids = torch.tensor([prompt])
    gc = GenerationConfig(do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=0,
                          eos_token_id=None, pad_token_id=0, bos_token_id=1, use_cache=True)
    with torch.no_grad():
        out = model.generate(ids, generation_config=gc)[0, len(prompt):].tolist()
        # Cross-check with an explicit KV-cache loop (no eos stop).
        res = model(ids, use_cache=True)
        past, seq = res.past_key_values, []
        nxt = int(res.logits[0, -1].argmax())
        for _ in range(N_GREEDY):
            seq.append(nxt)
            res = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past = res.past_key_values
            nxt = int(res.logits[0, -1].argmax())
    if out != seq:
        raise SystemExit("generate() and the KV loop disagree: %s vs %s" % (out, seq))
    return out


def write_config(path, cfg):
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def make_fixture(fx, out_root):
    name, store = fx["name"], fx["dtype"]
    out = os.path.join(out_root, name)
    cfg = copy.deepcopy(fx["config"])
    cfg["transformers_version"] = transformers.__version__
    if "rope_scaling" in cfg or "torch_dtype" in cfg:
        cfg["torch_dtype"] = DTYPE_NAMES[store]
    else:
        cfg["dtype"] = DTYPE_NAMES[store]
    eos = fx.get("gen_eos", cfg["eos_token_id"])
    gen = {"bos_token_id": 1, "eos_token_id": eos, "pad_token_id": 0,
           "transformers_version": transformers.__version__}

    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    write_config(os.path.join(out, "config.json"), cfg)
    write_config(os.path.join(out, "generation_config.json"), gen)

    # The model is built from the literal config.json, as a user would load it.
    config = AutoConfig.from_pretrained(out)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    init_weights(model, fx["seed"])
    inv_freq_f32 = rope_module(model).inv_freq.detach().clone()
    attn_factor = float(rope_module(model).attention_scaling)

    model.to(DTYPES[store])
    with tempfile.TemporaryDirectory() as tmp:
        kw = {}
        if fx.get("shards"):
            total = sum(p.numel() * p.element_size() for p in model.state_dict().values())
            kw["max_shard_size"] = int(total * 0.6)
        model.save_pretrained(tmp, **kw)
        files = sorted(f for f in os.listdir(tmp) if f.startswith("model"))
        for f in files:
            shutil.copy(os.path.join(tmp, f), os.path.join(out, f))
            os.chmod(os.path.join(out, f), 0o644)
    if fx.get("shards"):
        n = sum(1 for f in files if f.endswith(".safetensors"))
        if n != fx["shards"] or "model.safetensors.index.json" not in files:
            raise SystemExit("%s: expected %d shards, got %s" % (name, fx["shards"], files))
    model.float()

    inv_freq = rope_module(model).inv_freq.detach().clone()
    prompt = fx["prompt"]
    logits = forward_all(model, prompt)
    out_ids = greedy(model, prompt)

    # Sensitivity to the inv_freq rounding convention.
    rope_module(model).inv_freq = inv_freq_f32.clone()
    logits_f32rope = forward_all(model, prompt)
    rope_module(model).inv_freq = inv_freq

    # Reload from disk exactly as a user would and check the goldens.
    re = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    rm = rope_module(re)
    if float(rm.attention_scaling) != attn_factor:
        raise SystemExit("%s: reloaded attention factor differs" % name)
    if not torch.allclose(rm.inv_freq, inv_freq_f32, rtol=0, atol=0):
        raise SystemExit("%s: reloaded inv_freq differs from the built model's" % name)
    rm.inv_freq = rm.inv_freq.to(DTYPES[store]).float()
    dre = float(np.abs(forward_all(re, prompt) - logits).max())
    if dre > 1e-5:
        raise SystemExit("%s: reloaded model differs from the generator's by %g" % (name, dre))

    eos_set = set(eos if isinstance(eos, list) else [eos])
    T, V = logits.shape
    golden = {
        "model_type": cfg["model_type"],
        "prompt": prompt,
        "greedy": out_ids,
        "logits_shape": [T, V],
        "logits_last": [round(float(x), 6) for x in logits[-1]],
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "storage_dtype": store,
        "notes": fx["notes"] + " Greedy is 24 argmax steps with the KV cache; it does not stop at eos.",
        "greedy_eos_positions": [i for i, t in enumerate(out_ids) if t in eos_set],
        "rope": {
            "inv_freq": [float(x) for x in inv_freq.tolist()],
            "inv_freq_rounded_to": store,
            "inv_freq_f32": [float(x) for x in inv_freq_f32.tolist()],
            "attention_factor": attn_factor,
            "max_abs_logit_diff_with_f32_inv_freq": float(np.abs(logits_f32rope - logits).max()),
        },
    }
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f)
    logits.astype("<f4").tofile(os.path.join(out, "golden_logits.f32"))
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print("%-26s %s T=%-3d %7d bytes  greedy=%s  f32-rope-diff=%.2e  attn_factor=%.6f" % (
        name, store, T, size, out_ids[:8], golden["rope"]["max_abs_logit_diff_with_f32_inv_freq"],
        attn_factor))
    if size > 1_000_000:
        raise SystemExit("%s: fixture is %d bytes (> 1 MB)" % (name, size))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="fixture names to (re)generate")
    ap.add_argument("--out", default=OUT_ROOT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    todo = [f for f in fixtures() if not args.only or f["name"] in args.only]
    if not todo:
        sys.exit("no fixture matches %s" % args.only)
    for fx in todo:
        make_fixture(fx, args.out)


if __name__ == "__main__":
    main()
