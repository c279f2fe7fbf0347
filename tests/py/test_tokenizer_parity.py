"""Token ids and decoded text of `tern tokenize` / `tern detokenize` versus the
goldens made with the `tokenizers` package (tests/gen/gen_tokenizer_goldens.py)."""
import gzip, json, os, subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.environ.get("TERN_BIN", os.path.join(ROOT, "build", "tern"))
GOLD = os.path.join(ROOT, "tests", "goldens", "tokenizer")
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODELS = {
    "qwen3": os.path.join(SHARED, "fixtures/tokenizers/qwen3"),
    "gemma3": os.path.join(SHARED, "fixtures/tokenizers/gemma3"),
    "llama3": os.path.join(SHARED, "fixtures/tokenizers/llama3"),
    "demo": os.path.join(SHARED, "models/tern-demo-code-17m"),
    "tiny_sp": os.path.join(GOLD, "tiny_sp"),
    "tiny_wp": os.path.join(GOLD, "tiny_wp"),
    "tiny_meta": os.path.join(GOLD, "tiny_meta"),
    "tiny_bl": os.path.join(GOLD, "tiny_bl"),
}


def corpus():
    with open(os.path.join(GOLD, "corpus.jsonl"), encoding="utf-8") as f:
        return [json.loads(l)["text"] for l in f]


def goldens(name):
    with gzip.open(os.path.join(GOLD, name + ".jsonl.gz"), "rt", encoding="utf-8") as f:
        rows = [json.loads(l) for l in f]
    enc = [r for r in rows if "ids" in r]
    dec = [r for r in rows if "dec_ids" in r]
    return enc, dec


def run(args, lines):
    inp = "".join(json.dumps(l) + "\n" for l in lines)
    p = subprocess.run([TERN] + args, input=inp.encode(), capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def need(name):
    if not os.path.exists(TERN):
        pytest.skip("build/tern is not built")
    if not os.path.exists(os.path.join(MODELS[name], "tokenizer.json")):
        pytest.skip(f"{MODELS[name]} is missing")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_encode_matches(name):
    need(name)
    texts = corpus()
    enc, _ = goldens(name)
    assert len(enc) == len(texts)
    for add_special, key in ((True, "ids"), (False, "ids_plain")):
        out = run(["tokenize", "--model", MODELS[name], "--jsonl"],
                  [{"text": t, "add_special": add_special} for t in texts])
        assert len(out) == len(texts)
        bad = [i for i, (o, g) in enumerate(zip(out, enc)) if o.get("ids") != g[key]]
        if bad:
            i = bad[0]
            k = first_diff(out[i].get("ids", []), enc[i][key])
            pytest.fail(f"{name} add_special={add_special}: {len(bad)} lines differ; line {i} {texts[i][:80]!r} "
                        f"at token {k}: tern {out[i].get('ids', out[i])[k:k + 8]} ref {enc[i][key][k:k + 8]}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_decode_and_stream_match(name):
    need(name)
    _, dec = goldens(name)
    for skip, key in ((False, "text"), (True, "text_skip")):
        out = run(["detokenize", "--model", MODELS[name], "--jsonl"],
                  [{"ids": r["dec_ids"], "skip_special": skip} for r in dec])
        assert len(out) == len(dec)
        for o, g in zip(out, dec):
            assert "error" not in o, o
            assert o["text"] == g[key], (name, skip, g["dec_ids"][:20])
            assert o["stream"] == g[key], ("stream", name, skip, g["dec_ids"][:20])
            assert o["stream_valid"], (name, skip, g["dec_ids"][:20])


def test_cli_text_and_ids():
    need("qwen3")
    p = subprocess.run([TERN, "tokenize", "--model", MODELS["qwen3"], "--text", "Hello world"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "9707,1879"
    p = subprocess.run([TERN, "detokenize", "--model", MODELS["qwen3"], "--ids", "9707,1879"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == "Hello world"


def test_cli_refuses_bad_input(tmp_path):
    if not os.path.exists(TERN):
        pytest.skip("build/tern is not built")
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": []}}')
    p = subprocess.run([TERN, "tokenize", "--model", str(tmp_path), "--text", "x"], capture_output=True, text=True)
    assert p.returncode == 1 and "model type 'Unigram' is not supported" in p.stderr
    p = subprocess.run([TERN, "tokenize", "--model", str(tmp_path / "nope"), "--text", "x"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "cannot open" in p.stderr
