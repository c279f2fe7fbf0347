#!/usr/bin/env python3
"""Re-lay a model fixture as other on-disk layouts, at test time (standard library only).

  make_hf_cache(src, cache_root, repo="tern/tiny") -> snapshot dir
      Hugging Face hub cache layout, as huggingface_hub writes it:
        <cache_root>/models--tern--tiny/blobs/<sha256 of file>
        <cache_root>/models--tern--tiny/snapshots/<40-hex revision>/<file> -> ../../blobs/<sha256>
        <cache_root>/models--tern--tiny/refs/main            (the revision, no newline)
      Snapshot entries are relative symlinks into blobs/, so a loader must follow links.
      The revision is a deterministic sha1 over the file names and contents.

  make_sharded(src, dst, n_shards=2) -> dst
      Split src/model.safetensors into model-0000i-of-0000n.safetensors files plus
      model.safetensors.index.json (transformers' format: {"metadata": {"total_size"},
      "weight_map": {name: file}}). Tensor bytes are copied unchanged.

Command line:
    python3 tests/gen/hf_layouts.py cache SRC CACHE_ROOT [REPO]
    python3 tests/gen/hf_layouts.py shard SRC DST [N]
"""
import hashlib
import json
import os
import shutil
import struct
import sys

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors",
               "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json")


def _model_files(src):
    names = []
    for f in sorted(os.listdir(src)):
        if f in MODEL_FILES or (f.startswith("model-") and f.endswith(".safetensors")):
            names.append(f)
    return names


def make_hf_cache(src, cache_root, repo="tern/tiny"):
    """Copy the model files of src into a hub-cache tree; return the snapshot directory."""
    org, name = repo.split("/", 1)
    top = os.path.join(cache_root, "models--%s--%s" % (org, name))
    blobs = os.path.join(top, "blobs")
    os.makedirs(blobs, exist_ok=True)
    rev = hashlib.sha1()
    entries = []
    for f in _model_files(src):
        with open(os.path.join(src, f), "rb") as fh:
            data = fh.read()
        digest = hashlib.sha256(data).hexdigest()
        rev.update(f.encode() + b"\0" + digest.encode())
        blob = os.path.join(blobs, digest)
        if not os.path.exists(blob):
            with open(blob, "wb") as fh:
                fh.write(data)
        entries.append((f, digest))
    revision = rev.hexdigest()
    snap = os.path.join(top, "snapshots", revision)
    os.makedirs(snap, exist_ok=True)
    for f, digest in entries:
        link = os.path.join(snap, f)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", "..", "blobs", digest), link)
    os.makedirs(os.path.join(top, "refs"), exist_ok=True)
    with open(os.path.join(top, "refs", "main"), "w") as fh:
        fh.write(revision)
    return snap


def _read_safetensors(path):
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        data = fh.read()
    return header, data


def _write_safetensors(path, tensors, meta):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {}, 0
    if meta:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        for _, _, _, raw in tensors:
            fh.write(raw)


def make_sharded(src, dst, n_shards=2):
    header, data = _read_safetensors(os.path.join(src, "model.safetensors"))
    meta = header.pop("__metadata__", None)
    items = sorted(header.items())
    total = sum(v["data_offsets"][1] - v["data_offsets"][0] for _, v in items)
    os.makedirs(dst, exist_ok=True)
    shards, cur, cur_size = [], [], 0
    for name, v in items:
        a, b = v["data_offsets"]
        cur.append((name, v["dtype"], v["shape"], data[a:b]))
        cur_size += b - a
        if len(shards) < n_shards - 1 and cur_size >= total * (len(shards) + 1) / n_shards:
            shards.append(cur)
            cur = []
    shards.append(cur)
    if len(shards) != n_shards or any(not s for s in shards):
        raise ValueError("cannot split %d tensors into %d shards" % (len(items), n_shards))
    weight_map = {}
    for i, tensors in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, n_shards)
        _write_safetensors(os.path.join(dst, fname), tensors, meta)
        for t in tensors:
            weight_map[t[0]] = fname
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2)
    for f in os.listdir(src):
        if f.endswith(".json") and not f.startswith("model"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    if os.path.exists(os.path.join(src, "golden_logits.f32")):
        shutil.copy(os.path.join(src, "golden_logits.f32"), os.path.join(dst, "golden_logits.f32"))
    return dst


def main(argv):
    if len(argv) >= 3 and argv[0] == "cache":
        print(make_hf_cache(argv[1], argv[2], *(argv[3:4] or [])))
    elif len(argv) >= 3 and argv[0] == "shard":
        print(make_sharded(argv[1], argv[2], int(argv[3]) if len(argv) > 3 else 2))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
