#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, made from the repository's fixtures at
run time (standard library only):

    python3 tests/fuzz/seeds.py TARGET OUT_DIR [SHARED_DIR]

  safetensors  small valid files re-packed from the fixture checkpoints' headers
               (their smaller tensors), plus each real header with its data cut short
  config       every fixture config.json
  tokenizer    the small tokenizer.json fixtures, and each cut down to a few hundred
               vocabulary entries and merges so that a seed stays a few KB
  jinja        the chat templates of the fixture tokenizers and the template feature cases
  request      (the committed seeds only)
  toolcall     (the committed seeds only)

The committed inputs under tests/fuzz/corpus/TARGET (hand-written seeds and the
inputs that once crashed a target) are used beside these."""
import hashlib
import json
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def put(out, data):
    if isinstance(data, str):
        data = data.encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def model_dirs(shared):
    dirs = sorted((ROOT / "tests" / "fixtures" / "models").glob("*")) + [ROOT / "models" / "tern-demo-code-17m"]
    if shared:
        dirs += sorted((shared / "fixtures" / "models").glob("*"))
    return [d for d in dirs if (d / "config.json").exists()]


def safetensors(out, shared):
    files = []
    for d in model_dirs(shared):
        files += sorted(d.glob("*.safetensors"))
    for f in files:
        raw = f.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        meta = header.pop("__metadata__", None)
        small = [(k, v) for k, v in sorted(header.items())
                 if v["data_offsets"][1] - v["data_offsets"][0] <= 2048][:12]
        new, blobs, off = {}, [], 0
        if meta is not None:
            new["__metadata__"] = meta
        for k, v in small:
            a, b = v["data_offsets"]
            new[k] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [off, off + b - a]}
            blobs.append(raw[8 + n + a:8 + n + b])
            off += b - a
        hb = json.dumps(new, separators=(",", ":")).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        put(out, struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
        put(out, raw[:8 + n + 64])


def config(out, shared):
    for d in model_dirs(shared):
        put(out, (d / "config.json").read_bytes())


def tokenizer_files(shared):
    files = sorted((ROOT / "tests" / "goldens" / "tokenizer").glob("*/tokenizer.json"))
    files.append(ROOT / "models" / "tern-demo-code-17m" / "tokenizer.json")
    if shared:
        files += sorted((shared / "fixtures" / "tokenizers").glob("*/tokenizer.json"))
    return files


def cut_tokenizer(t, n_vocab=120, n_merges=60):
    m = t.get("model") or {}
    v = m.get("vocab")
    if isinstance(v, dict):
        keep = dict(sorted(v.items(), key=lambda kv: kv[1])[:n_vocab])
        m["vocab"] = keep
    elif isinstance(v, list):
        m["vocab"] = v[:n_vocab]
    if isinstance(m.get("merges"), list):
        m["merges"] = m["merges"][:n_merges]
    t["added_tokens"] = (t.get("added_tokens") or [])[:12]
    return t


def tokenizer(out, shared):
    for f in tokenizer_files(shared):
        raw = f.read_bytes()
        if len(raw) <= 8192:
            put(out, raw)
        put(out, json.dumps(cut_tokenizer(json.loads(raw)), ensure_ascii=False))


def jinja(out, shared):
    configs = []
    if shared:
        configs += sorted((shared / "fixtures" / "tokenizers").glob("*/tokenizer_config.json"))
        configs += sorted((shared / "fixtures" / "models").glob("*/tokenizer_config.json"))
    configs += sorted((ROOT / "tests" / "fixtures" / "models").glob("*/tokenizer_config.json"))
    configs.append(ROOT / "models" / "tern-demo-code-17m" / "tokenizer_config.json")
    for c in configs:
        t = json.loads(c.read_text()).get("chat_template")
        if isinstance(t, list):
            for e in t:
                put(out, e.get("template", ""))
        elif isinstance(t, str):
            put(out, t)
    for case in json.loads((ROOT / "tests" / "goldens" / "templates" / "features.json").read_text()):
        if case.get("template"):
            put(out, case["template"])


def main(argv):
    target, out = argv[0], pathlib.Path(argv[1])
    shared = pathlib.Path(argv[2]) if len(argv) > 2 else ROOT.parent / "shared"
    if not shared.exists():
        shared = None
    out.mkdir(parents=True, exist_ok=True)
    fn = {"safetensors": safetensors, "config": config, "tokenizer": tokenizer, "jinja": jinja}.get(target)
    if fn:
        fn(out, shared)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
