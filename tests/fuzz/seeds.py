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
  gguf         the fixture GGUF files re-packed small: their metadata with the token,
               merge and type arrays cut to a few hundred entries, and their smaller
               tensors (the block-format test file whole)
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


GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_read(raw):
    """(version, [(key, type, value bytes)], [(name, dims, type, data bytes)], alignment)."""
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, raw, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("<Q")
        pos += n
        return raw[pos - n:pos]

    def value(ty, cut):
        nonlocal pos
        start = pos
        if ty == 8:
            string()
        elif ty == 9:
            et, n = take("<I"), take("<Q")
            keep = min(n, cut)
            items = []
            for i in range(n):
                s0 = pos
                value(et, cut)
                if i < keep:
                    items.append(raw[s0:pos])
            return struct.pack("<IQ", et, keep) + b"".join(items)
        else:
            pos += struct.calcsize(GGUF_SCALAR[ty])
        return raw[start:pos]

    assert raw[:4] == b"GGUF"
    version = struct.unpack_from("<I", raw, 4)[0]
    pos = 8
    n_t, n_kv = take("<Q"), take("<Q")
    kvs, align = [], 32
    for _ in range(n_kv):
        key = string()
        ty = take("<I")
        v = value(ty, 200)
        if key == b"general.alignment":
            align = struct.unpack("<I", v)[0]
        kvs.append((key, ty, v))
    infos = []
    for _ in range(n_t):
        name = string()
        nd = take("<I")
        dims = [take("<Q") for _ in range(nd)]
        infos.append((name, dims, take("<I"), take("<Q")))
    data0 = (pos + align - 1) // align * align
    ends = sorted(o for *_, o in infos) + [len(raw) - data0]
    tensors = []
    for name, dims, ty, off in infos:
        end = min(e for e in ends if e > off)
        tensors.append((name, dims, ty, raw[data0 + off:data0 + end]))
    return version, kvs, tensors, align


def gguf_write(version, kvs, tensors, align):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, ty, v in kvs:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", ty) + v
    off, blobs = 0, []
    for name, dims, ty, data in tensors:
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ty, off)
        pad = (len(data) + align - 1) // align * align
        blobs.append(data + b"\0" * (pad - len(data)))
        off += pad
    out += b"\0" * ((align - len(out) % align) % align)
    return bytes(out + b"".join(blobs))


def gguf(out, shared):
    for f in sorted((ROOT / "tests" / "fixtures" / "gguf").glob("*.gguf")):
        raw = f.read_bytes()
        if len(raw) <= 65536:
            put(out, raw)
        version, kvs, tensors, align = gguf_read(raw)
        small = [t for t in tensors if len(t[3]) <= 1024][:8]
        put(out, gguf_write(version, kvs, small, align))
        put(out, gguf_write(version, kvs, [], align))


def main(argv):
    target, out = argv[0], pathlib.Path(argv[1])
    shared = pathlib.Path(argv[2]) if len(argv) > 2 else ROOT.parent / "shared"
    if not shared.exists():
        shared = None
    out.mkdir(parents=True, exist_ok=True)
    fn = {"safetensors": safetensors, "config": config, "tokenizer": tokenizer, "jinja": jinja,
          "gguf": gguf}.get(target)
    if fn:
        fn(out, shared)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
