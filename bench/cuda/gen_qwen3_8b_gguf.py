#!/usr/bin/env python3
"""Writes the llama.cpp baseline's model for the GPU benchmarks: the same
random Qwen3-8B-shaped weights as gen_qwen3_8b.py (read back from its
model.safetensors) as one GGUF file in F16 (the issue's llama.cpp figures)
or BF16, with no tokenizer ("none" vocabulary of vocab_size dummy tokens:
llama-bench feeds random ids). gguf-py comes from the llama.cpp source
tree (PYTHONPATH=.../llama.cpp/gguf-py).

    python3 bench/cuda/gen_qwen3_8b_gguf.py /tmp/q8b /tmp/q8b-f16.gguf [--type f16|bf16]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors import safe_open

import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "gen"))
from gen_gguf_models import add_model_metadata, gguf_name  # noqa: E402  (the fixtures' GGUF writer parts)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f16", "bf16"], default="f16")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.hf_dir, "config.json")))
    w = gguf.GGUFWriter(a.out, "qwen3")
    add_model_metadata(w, "random Qwen3-8B shape", cfg)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_tokenizer_model("none")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.type == "f16" else gguf.LlamaFileType.MOSTLY_BF16)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    with safe_open(os.path.join(a.hf_dir, "model.safetensors"), framework="pt") as f:
        for hf in f.keys():
            t = f.get_tensor(hf)
            if t.dim() == 1:
                arr = t.to(torch.float32).numpy()
                w.add_tensor(gguf_name(hf), arr)
            elif a.type == "f16":
                w.add_tensor(gguf_name(hf), t.to(dev).to(torch.float16).cpu().numpy())
            else:
                arr = t.contiguous().view(torch.uint16).numpy()
                w.add_tensor(gguf_name(hf), arr, raw_shape=list(arr.shape), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%.2f GB)" % (a.out, os.path.getsize(a.out) / 1e9))


if __name__ == "__main__":
    main()
