"""MLX affine-quantized checkpoints (tests/fixtures/mlx, made by tests/gen/gen_mlx_goldens.py
with mlx-lm): all-position logits of the reference path (--precision f32) within 1e-3 of
mlx-lm's own float32 logits on the same quantized weights, in both weight layouts; the
24-token greedy continuation identical; the fast path (int8 activations) close; `tern
inspect` reporting bits per weight by module; malformed quantized checkpoints refused with
clear errors."""
import json
import shutil
import struct
import subprocess

import numpy as np
import pytest

from conftest import ROOT

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "mlx").glob("*"))
FIXTURES = [d for d in FIXTURES if (d / "golden.json").exists()]


def logits(tern_bin, model, g, tmp_path, *extra):
    out = tmp_path / "l.f32"
    subprocess.run([tern_bin, "logits", "--model", str(model), "--ids", ",".join(map(str, g["prompt"])), "--all",
                    "--out", str(out), "--threads", "2", *extra], check=True)
    return np.fromfile(out, dtype=np.float32).reshape(g["logits_shape"])


def test_fixtures_present():
    assert len(FIXTURES) >= 5


@pytest.mark.parametrize("weights", ["panels", "mapped"])
@pytest.mark.parametrize("model", FIXTURES, ids=lambda d: d.name)
def test_logits_match_mlx_lm(tern_bin, model, weights, tmp_path):
    g = json.loads((model / "golden.json").read_text())
    got = logits(tern_bin, model, g, tmp_path, "--precision", "f32", "--weights", weights)
    want = np.fromfile(model / "golden_logits.f32", dtype=np.float32).reshape(g["logits_shape"])
    assert np.abs(got - want).max() <= 1e-3


@pytest.mark.parametrize("model", FIXTURES, ids=lambda d: d.name)
def test_greedy_matches_mlx_lm(tern_bin, model):
    g = json.loads((model / "golden.json").read_text())
    r = subprocess.run([tern_bin, "generate", "--model", str(model), "--ids", ",".join(map(str, g["prompt"])),
                        "--max-tokens", str(len(g["greedy"])), "--temperature", "0", "--precision", "f32",
                        "--ids-out", "--ignore-eos"], check=True, capture_output=True, text=True)
    assert [int(x) for x in r.stdout.strip().split(",")] == g["greedy"]


@pytest.mark.parametrize("model", FIXTURES, ids=lambda d: d.name)
def test_fast_path_is_close_and_layout_independent(tern_bin, model, tmp_path):
    """Default precision: activations quantized to int8 per group. The tiny random models
    amplify any perturbation, so the bound is loose; the layouts must agree bit for bit."""
    g = json.loads((model / "golden.json").read_text())
    a = logits(tern_bin, model, g, tmp_path, "--weights", "panels")
    b = logits(tern_bin, model, g, tmp_path, "--weights", "mapped")
    assert np.array_equal(a, b)
    want = np.fromfile(model / "golden_logits.f32", dtype=np.float32).reshape(g["logits_shape"])
    assert np.abs(a - want).max() <= 0.5
    assert (a.argmax(1) == want.argmax(1)).mean() >= 0.6


def test_inspect_reports_bits_per_weight(tern_bin):
    r = subprocess.run([tern_bin, "inspect", "--model", str(ROOT / "tests/fixtures/mlx/llama_mixed_f32")],
                       check=True, capture_output=True, text=True)
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("  ")}
    # f32 scales and biases: 4 + 64/64 bits at group 64, 8 + 64/32 at group 32
    assert "5.000" in lines["q_proj"] and "4-bit g64 x4" in lines["q_proj"]
    assert "10.000" in lines["down_proj"] and "8-bit g32 x4" in lines["down_proj"]
    assert "4-bit g64 x3, F32 x1" in lines["k_proj"]
    assert "MLX affine, 4 bits, group 64" in r.stdout


def copy_fixture(tmp_path, name="qwen3_tied_q4_g32"):
    dst = tmp_path / name
    shutil.copytree(ROOT / "tests" / "fixtures" / "mlx" / name, dst)
    return dst


def edit_config(d, fn):
    cfg = json.loads((d / "config.json").read_text())
    fn(cfg)
    (d / "config.json").write_text(json.dumps(cfg))


def run_logits(tern_bin, d, tmp_path):
    return subprocess.run([tern_bin, "logits", "--model", str(d), "--ids", "1,2", "--out", str(tmp_path / "x")],
                          capture_output=True, text=True)


@pytest.mark.parametrize("edit,message", [
    (lambda c: c["quantization"].update(bits=3), "3-bit quantization is not supported"),
    (lambda c: c["quantization"].update(mode="mxfp4"), "quantization mode mxfp4 is not supported"),
    (lambda c: c["quantization"].update(group_size=16), "group_size 16 is not supported"),
    (lambda c: c.pop("quantization") and c.update(quantization_config={"quant_method": "gptq", "bits": 4}),
     "quant_method gptq is not supported"),
    (lambda c: c.pop("quantization") and c.pop("quantization_config"), "has no \"quantization\" section"),
    (lambda c: c["quantization"].update({"model.layers.0.mlp.up_proj": False}), "maps it to false"),
    (lambda c: c["quantization"].update(bits=8), "expected U32 [512, 16] (8-bit codes of [512, 64])"),
    (lambda c: c["quantization"].update({"model.layers.0.self_attn.q_proj": {"group_size": 64, "bits": 4}}),
     "expected BF16 [128, 1] (group size 64)"),
])
def test_malformed_quantized_checkpoint_is_refused(tern_bin, tmp_path, edit, message):
    d = copy_fixture(tmp_path)
    edit_config(d, edit)
    r = run_logits(tern_bin, d, tmp_path)
    assert r.returncode == 1
    assert message in r.stderr, r.stderr


def test_scales_without_biases_is_refused(tern_bin, tmp_path):
    d = copy_fixture(tmp_path)
    path = d / "model.safetensors"
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["model.layers.0.mlp.up_proj.biasez"] = header.pop("model.layers.0.mlp.up_proj.biases")
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    r = run_logits(tern_bin, d, tmp_path)
    assert r.returncode == 1 and "has scales but no biases" in r.stderr, r.stderr
