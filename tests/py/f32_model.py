"""A float32 copy of a safetensors model directory, written with numpy only.

Used by tests/py/test_mlx_server_parity.py (at test time) and by
tests/gen/gen_mlx_server_goldens.py (for mlx_lm.server), so both servers load
byte-identical weights. config.json gets "dtype" and "torch_dtype" float32: tern
then keeps the rotary inverse frequencies in float32 (it rounds them to the
checkpoint dtype named there, as transformers does), which is what mlx-lm
computes for every checkpoint.
"""
import json
import pathlib
import shutil
import struct

import numpy as np

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json",
              "chat_template.jinja", "special_tokens_map.json")


def _read_safetensors(path):
    """Yields (name, float32 array) for every tensor of one file."""
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = raw[base + a:base + b]
        dt = t["dtype"]
        if dt == "BF16":
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif dt == "F32":
            arr = np.frombuffer(buf, dtype="<f4").astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {dt}")
        yield name, arr.reshape(t["shape"])


def _write_safetensors(path, tensors):
    header, offset = {}, 0
    for name in sorted(tensors):
        size = tensors[name].size * 4
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for name in sorted(tensors):
            f.write(np.ascontiguousarray(tensors[name], dtype="<f4").tobytes())


def make_f32_copy(src, dst):
    """Writes dst/{model.safetensors, config.json, tokenizer files} from src.
    Returns dst as a pathlib.Path."""
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for f in sorted(src.glob("*.safetensors")):
        tensors.update(_read_safetensors(f))
    _write_safetensors(dst / "model.safetensors", tensors)
    cfg = json.loads((src / "config.json").read_text())
    cfg["dtype"] = cfg["torch_dtype"] = "float32"
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for n in SIDE_FILES:
        if (src / n).exists():
            shutil.copy(src / n, dst / n)
    return dst
