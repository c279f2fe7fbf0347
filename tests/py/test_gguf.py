"""GGUF models (tests/fixtures/gguf, made by tests/gen/gen_gguf_models.py): an F32 file of a
transformers fixture reproduces transformers' logits (up to the documented effect of llama.cpp's
float32 rope frequencies); quantized files are compared with llama.cpp's own logits and greedy
continuation (llama-cpp-python goldens; llama.cpp quantizes activations, so the bounds below
are the measured agreement, not 1e-3); the tokenizer and chat template come from the file;
`tern inspect` reports bits per weight; broken files get errors naming file and offset."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT

GG = ROOT / "tests" / "fixtures" / "gguf"
PROMPT = [328, 384, 353, 219, 207, 297, 389, 171, 312, 166, 505, 106, 86, 86, 133, 180, 256, 432, 78, 401]
# Agreement of tern's reference path with llama.cpp: max |logit difference| and top-1 agreement
# over the 20 prompt positions. Measured (llama-cpp-python 0.3.36): llama_f32 1.1e-3 / 1.00,
# qwen3_tied_f32 1.2e-3 / 1.00, llama_q8_0 0.063 / 1.00, qwen2_q8_0 0.043 / 1.00,
# qwen3_tied_q8_0 0.039 / 1.00, qwen3_tied_q4_0 0.047 / 0.90. llama.cpp rounds activations
# (Q8_0 for quantized products, F16 elsewhere), hence the bounds; they sit ~1.5x above.
BOUNDS = {"qwen3_tied_f32": (3e-3, 1.0), "qwen3_tied_q8_0": (0.1, 0.95), "qwen3_tied_q4_0": (0.1, 0.85),
          "qwen2_q8_0": (0.1, 0.95), "llama_f32": (3e-3, 1.0), "llama_q8_0": (0.1, 0.95)}
# Greedy continuations (24 tokens) identical to llama.cpp's where the files are float32 and for
# qwen3_tied_q8_0 / q4_0; llama_q8_0 agrees for 11 tokens and qwen2_q8_0 for 1, where the top two
# logits are within 0.007 (below llama.cpp's own activation rounding).
GREEDY_SAME = ["llama_f32", "qwen3_tied_f32", "qwen3_tied_q8_0", "qwen3_tied_q4_0"]


def logits(tern_bin, path, tmp_path, *extra):
    out = tmp_path / "l.f32"
    subprocess.run([tern_bin, "logits", "--model", str(path), "--ids", ",".join(map(str, PROMPT)), "--all",
                    "--out", str(out), "--threads", "2", *extra], check=True)
    return np.fromfile(out, dtype=np.float32).reshape(len(PROMPT), -1)


@pytest.mark.parametrize("weights", ["panels", "mapped"])
def test_f32_file_matches_transformers(tern_bin, tmp_path, weights):
    g = json.loads((ROOT / "tests/fixtures/models/qwen3_tied/golden.json").read_text())
    want = np.fromfile(ROOT / "tests/fixtures/models/qwen3_tied/golden_logits.f32", dtype=np.float32).reshape(20, 512)
    got = logits(tern_bin, GG / "qwen3_tied_f32.gguf", tmp_path, "--precision", "f32", "--weights", weights)
    # the golden used bf16-rounded rope frequencies; GGUF (llama.cpp) keeps them in float32
    assert np.abs(got - want).max() <= g["rope"]["max_abs_logit_diff_with_f32_inv_freq"] + 1e-4


@pytest.mark.parametrize("weights", ["panels", "mapped"])
def test_llama_file_matches_transformers(tern_bin, tmp_path, weights):
    """llama's q/k rows are permuted in GGUF files (for llama.cpp's interleaved rope); tern puts
    them back. The fixture is float32, so no rope-frequency rounding is involved: 1e-3."""
    want = np.fromfile(ROOT / "tests/fixtures/models/llama_f32/golden_logits.f32", dtype=np.float32).reshape(20, 512)
    got = logits(tern_bin, GG / "llama_f32.gguf", tmp_path, "--precision", "f32", "--weights", weights)
    assert np.abs(got - want).max() <= 1e-3


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_agreement_with_llama_cpp(tern_bin, tmp_path, name):
    meta = GG / f"{name}.json"
    if not meta.exists():
        pytest.skip("llama.cpp goldens not generated")
    g = json.loads(meta.read_text())
    want = np.fromfile(GG / f"{name}.logits.f32", dtype=np.float32).reshape(g["logits_shape"])
    got = logits(tern_bin, GG / f"{name}.gguf", tmp_path, "--precision", "f32")
    diff, top1 = np.abs(got - want).max(), (got.argmax(1) == want.argmax(1)).mean()
    print(f"{name}: max |diff| {diff:.4g}, top-1 agreement {top1:.2f}")
    assert diff <= BOUNDS[name][0] and top1 >= BOUNDS[name][1]


@pytest.mark.parametrize("name", GREEDY_SAME)
def test_greedy_matches_llama_cpp(tern_bin, name):
    meta = GG / f"{name}.json"
    if not meta.exists():
        pytest.skip("llama.cpp goldens not generated")
    g = json.loads(meta.read_text())
    r = subprocess.run([tern_bin, "generate", "--model", str(GG / f"{name}.gguf"), "--ids", ",".join(map(str, PROMPT)),
                        "--max-tokens", str(len(g["greedy"])), "--temperature", "0", "--precision", "f32",
                        "--ids-out", "--ignore-eos"], check=True, capture_output=True, text=True)
    assert [int(x) for x in r.stdout.strip().split(",")] == g["greedy"]


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_tokenizer_matches_llama_cpp(tern_bin, name):
    meta = GG / f"{name}.json"
    if not meta.exists():
        pytest.skip("llama.cpp goldens not generated")
    for text, ids in json.loads(meta.read_text())["tokenize"].items():
        r = subprocess.run([tern_bin, "tokenize", "--model", str(GG / f"{name}.gguf"), "--text", text],
                           check=True, capture_output=True, text=True)
        assert [int(x) for x in r.stdout.strip().split(",") if x] == ids, text


def test_chat_template_from_file(tern_bin, tmp_path):
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    r = subprocess.run([tern_bin, "template", "--model", str(GG / "qwen3_tied_q8_0.gguf"), "--messages", str(msgs)],
                       check=True, capture_output=True, text=True)
    assert r.stdout.rstrip("\n") == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant"


def test_generate_from_text(tern_bin):
    r = subprocess.run([tern_bin, "generate", "--model", str(GG / "qwen3_tied_q4_0.gguf"), "--prompt", "the cat",
                        "--max-tokens", "5", "--temperature", "0", "--ids-out", "--ignore-eos"],
                       check=True, capture_output=True, text=True)
    assert len(r.stdout.strip().split(",")) == 5


def test_inspect_bits_per_weight(tern_bin):
    r = subprocess.run([tern_bin, "inspect", "--model", str(GG / "qwen3_tied_q4_0.gguf")], check=True,
                       capture_output=True, text=True)
    assert "architecture   qwen3" in r.stdout
    line = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("attn_q ")][0]
    assert "4.500" in line and "Q4_0 x4" in line


@pytest.mark.parametrize("cut", [10, 100, 3000, -1000])
def test_truncated_file_is_refused(tern_bin, tmp_path, cut):
    src = (GG / "qwen3_tied_q8_0.gguf").read_bytes()
    p = tmp_path / "t.gguf"
    p.write_bytes(src[:cut])
    r = subprocess.run([tern_bin, "logits", "--model", str(p), "--ids", "1", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and str(p) in r.stderr and "byte" in r.stderr, r.stderr


def test_unsupported_architecture_is_refused(tern_bin, tmp_path):
    src = bytearray((GG / "qwen2_q8_0.gguf").read_bytes())
    i = src.find(b"qwen2.block_count")
    assert i > 0
    j = src.find(b"qwen2", 0)     # general.architecture's value comes first
    src[j:j + 5] = b"gemma"
    p = tmp_path / "g.gguf"
    p.write_bytes(bytes(src))
    r = subprocess.run([tern_bin, "logits", "--model", str(p), "--ids", "1", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "architecture 'gemma'" in r.stderr, r.stderr


def test_serve_gguf_chat():
    from server_harness import Server
    s = Server(model=GG / "qwen3_tied_q8_0.gguf")
    try:
        code, body = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                     "max_tokens": 4, "temperature": 0})
        assert code == 200, body
        assert body["usage"]["completion_tokens"] == 4
        # the GGUF's chat template: <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n
        assert body["usage"]["prompt_tokens"] > 5
    finally:
        s.stop()
