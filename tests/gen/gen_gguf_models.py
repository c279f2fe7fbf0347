#!/usr/bin/env python3
"""Generate tiny GGUF model fixtures with goldens computed by llama.cpp (llama-cpp-python).

Output: tests/fixtures/gguf/<name>.gguf and <name>.json. Each model is one of the tiny
transformers fixtures in tests/fixtures/models (weights as stored, bf16 values widened to
float32) written with gguf-py's GGUFWriter under llama.cpp's tensor names and metadata keys,
in F32 or quantized by gguf-py (`gguf.quants.quantize`) to Q8_0 / Q4_0, with a small
byte-level BPE vocabulary (the 256 byte symbols + 256 merged pairs, pre-tokenizer "qwen2")
and a chat template. The goldens (<name>.json: prompt, greedy 24 ids, all-position logits
shape, logits file <name>.logits.f32) are llama.cpp's own: llama_cpp.Llama(logits_all=True)
evaluating the 20-token prompt (every position's logits), then greedy decoding with its KV
cache. llama.cpp quantizes activations for its quantized products (Q8_0 / Q8_K), so the
tests compare with a tolerance and report the measured difference.

Needs gguf, numpy and llama-cpp-python. Run from the repository root:
    python3 tests/gen/gen_gguf_models.py
"""
import json
import os
import struct

import gguf
import numpy as np
from gguf.constants import GGMLQuantizationType as T

SRC = os.path.join("tests", "fixtures", "models")
OUT = os.path.join("tests", "fixtures", "gguf")
PROMPT20 = [328, 384, 353, 219, 207, 297, 389, 171, 312, 166, 505, 106, 86, 86, 133, 180,
            256, 432, 78, 401]
N_GREEDY = 24
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

FIXTURES = [
    dict(name="qwen3_tied_f32", src="qwen3_tied", arch="qwen3", qtype=T.F32),
    dict(name="qwen3_tied_q8_0", src="qwen3_tied", arch="qwen3", qtype=T.Q8_0),
    dict(name="qwen3_tied_q4_0", src="qwen3_tied", arch="qwen3", qtype=T.Q4_0),
    dict(name="qwen2_q8_0", src="qwen2", arch="qwen2", qtype=T.Q8_0),
    dict(name="llama_f32", src="llama_f32", arch="llama", qtype=T.F32),
    dict(name="llama_q8_0", src="llama_f32", arch="llama", qtype=T.Q8_0),
]


def permute(w, n_head):
    """llama.cpp's converter reorders llama q/k rows for its interleaved rope (convert_hf_to_gguf.py)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = raw[8 + n + b:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F16":
            a = np.frombuffer(buf, dtype=np.float16).astype(np.float32)
        else:
            a = np.frombuffer(buf, dtype=np.float32)
        out[k] = a.reshape(v["shape"]).copy()
    return out


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocab():
    sym = bytes_to_unicode()
    tokens = list(sym)
    merges = []
    letters = "etaoinshrdlucmfw"
    for a in letters:
        for b in letters:
            tokens.append(a + b)
            merges.append(f"{a} {b}")
    tokens = tokens[:509] + ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    merges = [m for m in merges if m.replace(" ", "") in tokens]
    types = [1] * 509 + [3, 3, 3]
    return tokens, merges, types


NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
         "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    layer, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    return f"blk.{layer}.{NAMES[rest]}.{kind}"


def add_model_metadata(w, name, cfg):
    """The decoder's hyperparameters from a Hugging Face config.json."""
    w.add_name(name)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    rope = cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    w.add_rope_freq_base(rope)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])


def make(fx):
    src = os.path.join(SRC, fx["src"])
    cfg = json.load(open(os.path.join(src, "config.json")))
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    path = os.path.join(OUT, fx["name"] + ".gguf")
    arch = fx["arch"]
    w = gguf.GGUFWriter(path, arch)
    add_model_metadata(w, fx["name"], cfg)
    w.add_file_type(0 if fx["qtype"] == T.F32 else 7 if fx["qtype"] == T.Q8_0 else 2)
    tokens, merges, types = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(511)
    w.add_eos_token_id(510)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    for hf, a in weights.items():
        name = gguf_name(hf)
        if arch == "llama" and hf.endswith("q_proj.weight"):
            a = permute(a, cfg["num_attention_heads"])
        if arch == "llama" and hf.endswith("k_proj.weight"):
            a = permute(a, cfg["num_key_value_heads"])
        if a.ndim == 1 or fx["qtype"] == T.F32:
            w.add_tensor(name, a.astype(np.float32))
        else:
            q = gguf.quants.quantize(a.astype(np.float32), fx["qtype"])
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=fx["qtype"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, cfg["vocab_size"]


def goldens(path, vocab_size, name):
    from llama_cpp import Llama
    llm = Llama(model_path=path, logits_all=True, n_ctx=64, n_threads=2, n_batch=64, verbose=False, seed=0)
    llm.eval(PROMPT20)
    logits = np.array(llm.scores[:len(PROMPT20)], dtype=np.float32)
    greedy = []
    tok = int(np.argmax(logits[-1]))
    for _ in range(N_GREEDY):
        greedy.append(tok)
        llm.eval([tok])
        tok = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1])))
    logits.tofile(os.path.join(OUT, name + ".logits.f32"))
    texts = ["the cat sat on the mat", "in other words, it is done.\n\nthen  more", "héllo wörld 123 456",
             "<|im_start|>user\nhi there<|im_end|>\n"]
    tok = {t: llm.tokenize(t.encode(), add_bos=False, special=True) for t in texts}
    import llama_cpp
    meta = {"prompt": PROMPT20, "greedy": greedy, "logits_shape": list(logits.shape),
            "llama_cpp_python": llama_cpp.__version__, "tokenize": tok,
            "notes": "llama.cpp (llama-cpp-python) all-position logits of the prompt and greedy continuation "
                     "with its KV cache; llama.cpp rounds activations to Q8_0/F16 for its products."}
    json.dump(meta, open(os.path.join(OUT, name + ".json"), "w"), indent=1)
    print(name, greedy[:8])


def main():
    os.makedirs(OUT, exist_ok=True)
    for fx in FIXTURES:
        path, v = make(fx)
        goldens(path, v, fx["name"])


if __name__ == "__main__":
    main()
