"""tern generate / tern bench with speculation: the output equals the plain
run token for token, greedy and seeded, for both drafters, and --stats
prints one JSON line with the counters (also without speculation)."""
import json
import subprocess

import pytest

from server_harness import ROOT, TERN

SHARED = ROOT.parent / "shared" / "models"
TARGET = SHARED / "tern-demo-code-42m"
DRAFT = SHARED / "tern-demo-code-draft-4m"
CODE = ("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n\n"
        "def fact(n):\n    if n < 2:\n        return 1\n    return n * fact(n - 1)\n\n\ndef ")
KEYS = {"prompt_tokens", "generated_tokens", "prefill_tps", "decode_tps", "drafted", "accepted", "target_calls"}


def gen(*extra):
    r = subprocess.run([str(TERN), "generate", "--model", str(TARGET), "--prompt", CODE, "--max-tokens", "40",
                        "--ids-out", "--stats", "--threads", "2", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), json.loads(r.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("sampling", [(), ("--temperature", "0.8", "--seed", "3")], ids=["greedy", "seeded"])
def test_speculative_generate_equals_plain(sampling):
    plain, ps = gen(*sampling)
    assert set(ps) == KEYS and ps["drafted"] == 0 and ps["target_calls"] == ps["generated_tokens"]
    # How much each drafter drafts follows measured costs; the target drafting
    # for itself proposes its own greedy tokens, so greedy keeps all of them.
    for spec in (("--draft-kind", "ngram"), ("--draft-model", str(DRAFT)),
                 ("--draft-model", str(DRAFT), "--num-draft-tokens", "8"), ("--draft-model", str(TARGET))):
        out, st = gen(*sampling, *spec)
        assert out == plain, spec
        assert set(st) == KEYS and st["generated_tokens"] == ps["generated_tokens"]
        assert 0 <= st["accepted"] <= st["drafted"]
        if not sampling and spec[-1] == str(TARGET):
            assert st["drafted"] > 0 and st["accepted"] == st["drafted"], st
            assert st["target_calls"] < st["generated_tokens"], st


def test_bench_with_a_draft_model():
    r = subprocess.run([str(TERN), "bench", "--model", str(TARGET), "--prompt-tokens", "32", "--gen-tokens", "16",
                        "--reps", "1", "--threads", "1", "--draft-model", str(DRAFT), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout.strip().splitlines()[-1])
    assert j["decode_tps"] > 0
    r = subprocess.run([str(TERN), "bench", "--model", str(TARGET), "--draft-kind", "ngram", "--draft-model", str(DRAFT)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--draft-model goes with --draft-kind model" in r.stderr
