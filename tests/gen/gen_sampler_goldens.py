#!/usr/bin/env python3
"""Generate the sampler goldens in tests/goldens/sampler/ with mlx + mlx-lm (CPU).

    pip install 'mlx[cpu]' mlx-lm
    python3 tests/gen/gen_sampler_goldens.py

The reference is mlx_lm.sample_utils (make_logits_processors, apply_top_p,
apply_min_p, apply_top_k, the greedy sampler) and mlx.core.random (key,
split, bits via uniform, categorical). tern keys each decoding step with
key(seed XOR ((step + 1) * 0x9e3779b97f4a7c15)) and, when XTC is on, splits
that key: row 0 drives XTC's uniform draw, row 1 the categorical draw. mlx-lm's
apply_xtc draws from the global random state, so here its body is run with an
explicit key (checked equal to apply_xtc itself where the draw cannot matter).
The draw is mx.random.categorical on a [1, V] row, which MLX (0.32) computes
by inverse CDF from one uniform; the keyed replica is checked against
make_sampler itself under mx.random.seed.

Sampling values are passed as the plain Python floats a JSON request carries
(mlx-lm takes 1/temperature and log(min_p) in double precision).

Float arrays are stored as hex strings of little-endian float32 bytes, so
-inf and every bit survive the JSON; 64-bit seeds are decimal strings.
"""
import json
import math
import os
import struct

import mlx.core as mx
import numpy as np
from mlx_lm import sample_utils as su

OUT = os.path.join(os.path.dirname(__file__), "..", "goldens", "sampler")
VOCAB = 512
GOLDEN_RATIO_64 = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


def hexf(a):
    a = np.asarray(a, dtype=np.float32).reshape(-1)
    return a.astype("<f4").tobytes().hex()


def step_key(seed, step):
    return mx.random.key((seed ^ (((step + 1) * GOLDEN_RATIO_64) & MASK64)) & MASK64)


def make_logits(rng):
    """Named [VOCAB] float32 logits vectors: plain, peaked, with ties and -inf."""
    vecs = {}
    vecs["normal"] = rng.standard_normal(VOCAB).astype(np.float32) * 2.0
    peaked = rng.standard_normal(VOCAB).astype(np.float32) * 1.5
    peaked[rng.choice(VOCAB, 6, replace=False)] += np.array([9, 8.5, 8, 7, 6, 5], np.float32)
    vecs["peaked"] = peaked
    ties = np.round(rng.standard_normal(VOCAB) * 2.0).astype(np.float32) / 2.0
    ties[rng.choice(VOCAB, 40, replace=False)] = -np.inf
    ties[[3, 77, 200, 401]] = 4.0  # several tokens share the top value
    vecs["ties_inf"] = ties
    sharp = rng.standard_normal(VOCAB).astype(np.float32)
    sharp[17] = 14.0
    sharp[300] = 12.5
    vecs["sharp"] = sharp
    return vecs


def processors_for(cfg):
    bias = cfg.get("logit_bias")
    return su.make_logits_processors(
        {int(k): v for k, v in bias.items()} if bias else None,
        cfg.get("repetition_penalty"),
        cfg.get("repetition_context_size", 20),
        cfg.get("presence_penalty"),
        cfg.get("presence_context_size", 20),
        cfg.get("frequency_penalty"),
        cfg.get("frequency_context_size", 20),
    )


def run_processors(logits, history, cfg):
    x = mx.array(logits)[None]
    tokens = mx.array(np.asarray(history, dtype=np.int32))
    for proc in processors_for(cfg):
        x = proc(tokens, x)
    lp = x - mx.logsumexp(x, keepdims=True)
    mx.eval(x, lp)
    return np.array(x[0]), np.array(lp[0])


def xtc_with_key(logits, probability, threshold, special, key):
    """mlx-lm's apply_xtc, with the uniform draw taken from `key`."""
    probs = mx.softmax(logits, -1)
    mask = probs > mx.where(probs > threshold, probs, mx.inf).min(axis=-1, keepdims=True)
    if special:
        mask[..., special] = False
    return mx.where(
        mx.random.uniform(0, 1, key=key) > probability,
        logits,
        mx.where(mask, -mx.inf, logits),
    )


def run_chain(logprobs, cfg, key):
    """Filters of make_sampler in its order; returns the filtered logprobs
    and the categorical key (split off when XTC is on)."""
    x = mx.array(logprobs)[None]
    draw_key = key
    if cfg.get("xtc_probability", 0.0) > 0.0:
        keys = mx.random.split(key)
        xtc_key, draw_key = keys[0], keys[1]
    top_p = cfg.get("top_p", 0.0)
    if 0 < top_p < 1.0:
        x = su.apply_top_p(x, top_p)
    min_p = cfg.get("min_p", 0.0)
    if min_p != 0.0:
        x = su.apply_min_p(x, min_p, cfg.get("min_tokens_to_keep", 1))
    if cfg.get("xtc_probability", 0.0) > 0.0:
        x = xtc_with_key(
            x, cfg["xtc_probability"], cfg["xtc_threshold"],
            cfg.get("xtc_special", []), xtc_key)
    if cfg.get("top_k", 0) > 0:
        x = su.apply_top_k(x, cfg["top_k"])
    mx.eval(x)
    return x, draw_key


def draw(logprobs, cfg, seed, step):
    temp = cfg["temperature"]
    if temp == 0:
        return int(su.make_sampler(0.0)(mx.array(logprobs)[None]).item())
    x, draw_key = run_chain(logprobs, cfg, step_key(seed, step))
    tok = mx.random.categorical(x * (1.0 / temp), key=draw_key)
    return int(tok.item())


def check_xtc_replica(logprobs):
    """The keyed replica equals mlx-lm's apply_xtc when probability is 1."""
    x = mx.array(logprobs)[None]
    special = [5, 6]
    a = su.apply_xtc(x, 1.0, 0.05, special)
    b = xtc_with_key(x, 1.0, 0.05, special, mx.random.key(1))
    assert np.array_equal(np.array(a), np.array(b)), "xtc replica diverges"


def main():
    mx.set_default_device(mx.cpu)
    rng = np.random.default_rng(20261129)
    vecs = make_logits(rng)
    names = sorted(vecs)
    lp_of = {}
    for n in names:
        x = mx.array(vecs[n])[None]
        lp = x - mx.logsumexp(x, keepdims=True)
        lp_of[n] = np.array(lp[0])

    # Histories: prompt + generated ids, with repeats and a run at the end.
    hist_long = [int(t) for t in rng.integers(0, VOCAB, 50)] + [17, 17, 300, 17, 3, 3, 3]
    hist_short = [17, 300, 17]

    out = {"vocab": VOCAB, "logits": {n: hexf(vecs[n]) for n in names},
           "logprobs": {n: hexf(lp_of[n]) for n in names}}

    # 1. Logits processors (+ log-softmax), each alone and combined.
    proc_cfgs = [
        {"logit_bias": {"3": 2.5, "17": -100.0, "511": 1.25}},
        {"repetition_penalty": 1.3},
        {"repetition_penalty": 1.3, "repetition_context_size": 0},
        {"repetition_penalty": 0.8, "repetition_context_size": 5},
        {"presence_penalty": 0.7},
        {"presence_penalty": -0.5, "presence_context_size": 3},
        {"frequency_penalty": 0.4},
        {"frequency_penalty": 0.3, "frequency_context_size": 0},
        {"logit_bias": {"17": 3.0, "40": -1.5}, "repetition_penalty": 1.2,
         "repetition_context_size": 10, "presence_penalty": 0.5,
         "presence_context_size": 0, "frequency_penalty": 0.25},
    ]
    procs = []
    for n in names:
        for hname, hist in (("long", hist_long), ("short", hist_short)):
            for cfg in proc_cfgs:
                logits, lp = run_processors(vecs[n], hist, cfg)
                procs.append({"logits": n, "history": hist, "params": cfg,
                              "processed": hexf(logits), "logprobs": hexf(lp)})
    out["processors"] = procs

    # 2. Filters alone and chained (the array handed to the categorical draw).
    special = [5, 6]
    filt_cfgs = [
        {"top_p": 0.1}, {"top_p": 0.5}, {"top_p": 0.9}, {"top_p": 0.95},
        {"min_p": 0.05}, {"min_p": 0.2}, {"min_p": 0.2, "min_tokens_to_keep": 5},
        {"min_p": 0.9, "min_tokens_to_keep": 50},
        {"top_k": 1}, {"top_k": 2}, {"top_k": 5}, {"top_k": 40}, {"top_k": 511},
        {"xtc_probability": 1.0, "xtc_threshold": 0.1, "xtc_special": special},
        {"xtc_probability": 1.0, "xtc_threshold": 0.01, "xtc_special": []},
        {"xtc_probability": 0.5, "xtc_threshold": 0.05, "xtc_special": special},
        {"top_p": 0.9, "min_p": 0.05, "top_k": 20},
        {"top_p": 0.8, "min_p": 0.02, "min_tokens_to_keep": 3,
         "xtc_probability": 0.7, "xtc_threshold": 0.1, "xtc_special": special, "top_k": 30},
    ]
    filters = []
    for n in names:
        check_xtc_replica(lp_of[n])
        for cfg in filt_cfgs:
            for seed, step in ((7, 0), (7, 1), (123456789, 5)):
                if cfg.get("xtc_probability", 0.0) in (0.0, 1.0) and (seed, step) != (7, 0):
                    continue  # no draw involved: one run is enough
                x, _ = run_chain(lp_of[n], cfg, step_key(seed, step))
                filters.append({"logits": n, "params": cfg, "seed": str(seed), "step": step,
                                "filtered": hexf(np.array(x[0]))})
    out["filters"] = filters

    # 3. Draws: the token for given (seed, step), through the whole chain.
    draw_cfgs = [
        {"temperature": 1.0},
        {"temperature": 0.5},
        {"temperature": 1.5, "top_k": 40},
        {"temperature": 0.75, "top_p": 0.9},
        {"temperature": 0.7, "top_p": 0.9},
        {"temperature": 1.0, "min_p": 0.05},
        {"temperature": 0.9, "min_p": 0.03, "min_tokens_to_keep": 2},
        {"temperature": 1.0, "xtc_probability": 0.5, "xtc_threshold": 0.05,
         "xtc_special": special},
        {"temperature": 0.8, "top_p": 0.95, "min_p": 0.02, "xtc_probability": 0.3,
         "xtc_threshold": 0.1, "xtc_special": special, "top_k": 50},
        {"temperature": 0.0},
    ]
    draws = []
    for n in names:
        for cfg in draw_cfgs:
            toks = []
            for step in range(16):
                toks.append(draw(lp_of[n], cfg, 0xDEADBEEFCAFEF00D, step))
            draws.append({"logits": n, "params": cfg, "seed": str(0xDEADBEEFCAFEF00D),
                          "first_step": 0, "tokens": toks})
    out["draws"] = draws

    # 4. mlx-lm's own make_sampler (compiled, global random state seeded with
    # mx.random.seed): each random call takes split(state)[1] and keeps
    # split(state)[0] as the new state, XTC's uniform first, then the draw.
    sampler_cases = []
    for n in names:
        for cfg in draw_cfgs:
            if cfg["temperature"] == 0:
                continue
            toks = []
            for seed in range(100, 112):
                mx.random.seed(seed)
                sampler = su.make_sampler(
                    cfg["temperature"], top_p=cfg.get("top_p", 0.0),
                    min_p=cfg.get("min_p", 0.0),
                    min_tokens_to_keep=cfg.get("min_tokens_to_keep", 1),
                    top_k=cfg.get("top_k", 0),
                    xtc_probability=cfg.get("xtc_probability", 0.0),
                    xtc_threshold=cfg.get("xtc_threshold", 0.0),
                    xtc_special_tokens=cfg.get("xtc_special", []))
                toks.append(int(sampler(mx.array(lp_of[n])[None]).item()))
            sampler_cases.append({"logits": n, "params": cfg, "first_seed": 100,
                                  "tokens": toks})
            if cfg.get("xtc_probability", 0.0) == 0.0:
                # the keyed replica used above agrees with make_sampler
                for i, seed in enumerate(range(100, 112)):
                    x, _ = run_chain(lp_of[n], cfg, mx.random.key(seed))
                    k = mx.random.split(mx.random.key(seed))[1]
                    t = mx.random.categorical(x * (1.0 / cfg["temperature"]), key=k)
                    assert int(t.item()) == toks[i], "keyed replica diverges from make_sampler"
    out["mlx_lm_sampler"] = sampler_cases

    # 5. A Qwen-sized vocabulary whose logits both sides rebuild from the PRNG
    # (uniform(key(5), [V]) * 12, plus a few spikes), so only tokens are stored.
    big_v = 151936
    spikes = {"17": 9.0, "9001": 8.5, "151000": 8.0, "42": 6.0}
    big = mx.random.uniform(shape=(big_v,), key=mx.random.key(5)) * 12.0
    for i, v in spikes.items():
        big[int(i)] = big[int(i)] + v
    big_lp = np.array((big - mx.logsumexp(big, keepdims=True)))
    big_cases = []
    for cfg in draw_cfgs:
        x, _ = run_chain(big_lp, cfg, step_key(99, 0))
        finite = int(np.isfinite(np.array(x)).sum())
        toks = [draw(big_lp, cfg, 99, step) for step in range(6)]
        big_cases.append({"params": cfg, "seed": "99", "tokens": toks,
                          "finite_after_filters_step0": finite})
    out["big_vocab"] = {"vocab": big_v, "key_seed": 5, "scale": 12.0, "spikes": spikes,
                        "cases": big_cases}

    # 6. The float32 scale 1/temperature and offset log(min_p) that mlx-lm
    # derives in double precision from the request's values.
    temps = [round(0.05 * i, 2) for i in range(1, 41)] + [0.33, 0.66, 0.7, 0.95, 1.1, 1.3]
    mins = [round(0.01 * i, 2) for i in range(1, 100)] + [0.001, 0.005, 0.075, 0.125]
    out["param_floats"] = {
        "temperature": [[t, hexf(np.float32(1.0 / t))] for t in temps],
        "min_p": [[m, hexf(np.float32(math.log(m)))] for m in mins],
    }

    # 7. PRNG layout: bits (through uniform), split, gumbel, step keys.
    prng = []
    for seed in (0, 1, 0x123456789ABCDEF0, MASK64):
        k = mx.random.key(seed)
        s = mx.random.split(k)
        entry = {"seed": str(seed), "key": [int(v) for v in k.tolist()],
                 "split": [int(v) for v in s.reshape(-1).tolist()],
                 "uniform": {}, "gumbel7": hexf(np.array(mx.random.gumbel((7,), key=k)))}
        for n in (1, 2, 3, 4, 5, 8, 13):
            entry["uniform"][str(n)] = hexf(np.array(mx.random.uniform(shape=(n,), key=k)))
        sk = step_key(seed, 41)
        entry["step41_key"] = [int(v) for v in sk.tolist()]
        prng.append(entry)
    out["prng"] = prng

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "sampler_goldens.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {path}: {len(procs)} processor cases, {len(filters)} filter cases, "
          f"{len(draws)} draw cases, {os.path.getsize(path)} bytes; mlx {mx.__version__}")


if __name__ == "__main__":
    main()
