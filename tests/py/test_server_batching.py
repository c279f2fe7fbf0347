"""tern serve with continuous batching: concurrent replies equal their solo
replies byte for byte (greedy and seeded), n > 1, admission limits (400 for a
request that can never fit, 503 + Retry-After for a full line), and a client
that disconnects has its row and KV blocks freed."""
import json
import socket
import threading
import time

import pytest

from server_harness import ROOT, Server

PROMPTS = ["def add(a, b):", "class Stack:\n    def __init__(self):", "import os\n\ndef walk(path):",
           "# sort a list\ndef sort(xs):", "def fib(n):", "for i in range(10):", "x = [i * i for i in",
           "def main():\n    args ="]


@pytest.fixture(scope="module")
def srv():
    s = Server("--max-batch", "8", "--prefill-interleave", "8")
    yield s
    assert s.stop() == 0, s.output()


def body(i, **kw):
    b = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 24 + 3 * i, "logit_bias": {"8187": -100}}
    if i % 2:
        b.update(temperature=0.8, top_p=0.9, seed=100 + i)
    if i % 3 == 2:
        b.update(repetition_penalty=1.2, logprobs=True, top_logprobs=2)
    b.update(kw)
    return b


def test_concurrent_equals_solo(srv):
    n = 16
    solo = []
    for i in range(n):
        status, r = srv.post("/v1/completions", body(i))
        assert status == 200, r
        solo.append(r)
    got = [None] * n

    def run(i):
        time.sleep(0.01 * (i % 5))
        got[i] = srv.post("/v1/completions", body(i))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(n):
        status, r = got[i]
        assert status == 200, r
        assert r["choices"][0]["text"] == solo[i]["choices"][0]["text"], i
        assert r["choices"][0].get("logprobs") == solo[i]["choices"][0].get("logprobs"), i
        assert r["usage"] == solo[i]["usage"]
    assert srv.metric("tern_running_rows") == 0


def test_n_choices(srv):
    b = body(1, n=3)
    status, r = srv.post("/v1/completions", b)
    assert status == 200, r
    ch = r["choices"]
    assert [c["index"] for c in ch] == [0, 1, 2]
    # Choice c is sampled with seed + c: choice 1 equals a single request seeded + 1.
    status, one = srv.post("/v1/completions", body(1, seed=b["seed"] + 1))
    assert ch[1]["text"] == one["choices"][0]["text"]
    status, zero = srv.post("/v1/completions", body(1))
    assert ch[0]["text"] == zero["choices"][0]["text"]
    status, two = srv.post("/v1/completions", body(1, seed=b["seed"] + 2))
    assert ch[2]["text"] == two["choices"][0]["text"]
    assert r["usage"]["completion_tokens"] == sum(x["usage"]["completion_tokens"] for x in (zero, one, two))
    assert r["usage"]["prompt_tokens"] == zero["usage"]["prompt_tokens"]
    status, r = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2,
                                                   "max_tokens": 8, "temperature": 1.0, "seed": 5})
    assert status == 200 and len(r["choices"]) == 2 and r["choices"][1]["index"] == 1
    status, r = srv.post("/v1/completions", body(0, n=2, stream=True))
    assert status == 400 and "n > 1" in r["error"]["message"]
    status, r = srv.post("/v1/completions", body(0, n=0))
    assert status == 400


def test_disconnect_frees_row(srv):
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    data = json.dumps({"prompt": "def f():", "max_tokens": 3000, "stream": True,
                       "logit_bias": {"8187": -100}}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    while buf.count(b"data: ") < 3:
        buf += sock.recv(4096)
    assert srv.metric("tern_running_rows") == 1
    assert srv.metric('tern_kv_blocks{state="used"}') > 0
    sock.close()
    t0 = time.time()
    while srv.metric("tern_running_rows") != 0 and time.time() - t0 < 5:
        time.sleep(0.02)
    assert srv.metric("tern_running_rows") == 0
    # What stays in use is the prompt cache's (the row published its blocks).
    assert srv.metric('tern_kv_blocks{state="used"}') == srv.metric('tern_kv_blocks{state="cached"}')
    assert srv.metric('tern_kv_blocks{state="reserved"}') == 0


def test_admission_limits():
    # 2 MB of KV = 7 blocks of 32 positions of the demo model (8 KB each): a
    # 300-token prompt can never fit; max_tokens is clamped to the room left.
    s = Server("--memory-budget", "2MB", "--queue-size", "1", "--max-batch", "2")
    try:
        status, r = s.post("/v1/completions", {"prompt": "x = 1\n" * 150, "max_tokens": 4})
        assert status == 400 and "KV pool" in r["error"]["message"], r
        status, r = s.post("/v1/completions", {"prompt": "def f():", "max_tokens": 1000,
                                                "logit_bias": {"8187": -100}})
        assert status == 200 and r["choices"][0]["finish_reason"] == "length", r
        cap = s.metric('tern_kv_blocks{state="total"}') * 32
        assert cap == 224
        assert r["usage"]["completion_tokens"] + r["usage"]["prompt_tokens"] == cap
        # One long request holds the pool; one waits; the next is refused.
        hold = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        data = json.dumps({"prompt": "def f():", "max_tokens": 150, "stream": True,
                           "logit_bias": {"8187": -100}}).encode()
        hold.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        buf = b""
        while b"data: " not in buf:
            buf += hold.recv(4096)
        wait = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        data = json.dumps({"prompt": "def g():", "max_tokens": 100}).encode()
        wait.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        t0 = time.time()
        while s.metric("tern_queue_depth") != 1 and time.time() - t0 < 5:
            time.sleep(0.01)
        c = s.conn()
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "a", "max_tokens": 100}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 503 and r.getheader("Retry-After") == "1"
        assert "queue is full" in json.loads(r.read())["error"]["message"]
        c.close()
        hold.close()
        wait.settimeout(60)
        resp = b""
        while b"\r\n\r\n" not in resp or not resp.rstrip().endswith(b"}"):
            chunk = wait.recv(65536)
            if not chunk:
                break
            resp += chunk
        assert resp.startswith(b"HTTP/1.1 200"), resp[:200]
        wait.close()
    finally:
        assert s.stop() == 0, s.output()


def test_prompt_cache_hits_are_exact(srv):
    cold = Server("--prompt-cache-bytes", "0")
    try:
        long = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30))
        msgs = [{"role": "user", "content": long + "Write one more."}]
        b1 = {"messages": msgs, "max_tokens": 16, "temperature": 0.7, "seed": 9}
        s1, r1 = srv.post("/v1/chat/completions", b1)
        assert s1 == 200
        turn2 = msgs + [{"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
                        {"role": "user", "content": "And another."}]
        b2 = {"messages": turn2, "max_tokens": 16, "temperature": 0.7, "seed": 9}
        s2, r2 = srv.post("/v1/chat/completions", b2)
        assert s2 == 200
        cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= 256 and cached % 32 == 0 and cached < r2["usage"]["prompt_tokens"]
        sc, rc = cold.post("/v1/chat/completions", b2)
        assert rc["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert rc["choices"][0]["message"] == r2["choices"][0]["message"]
        # Anthropic reports the same hit as cache_read_input_tokens.
        ab = {"model": "m", "max_tokens": 8, "messages": turn2}
        sa, ra = srv.post("/v1/messages", ab)
        assert sa == 200 and ra["usage"]["cache_read_input_tokens"] >= 256
        sa2, ra2 = cold.post("/v1/messages", ab)
        assert ra2["usage"]["cache_read_input_tokens"] == 0 and ra2["content"] == ra["content"]
        assert srv.metric("tern_prompt_cache_hits_total") >= 2
        assert srv.metric("tern_prompt_cache_tokens_total") >= 512
    finally:
        assert cold.stop() == 0


def test_prompt_cache_survives_restart(tmp_path):
    long = "".join(f"def g{i}(x):\n    return x * {i}\n\n" for i in range(30))
    body = {"prompt": long + "def main():", "max_tokens": 12, "temperature": 0.5, "seed": 3}
    cache = tmp_path / "kv"
    a = Server("--prompt-cache-dir", str(cache))
    try:
        s, first = a.post("/v1/completions", body)
        assert s == 200 and first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    finally:
        assert a.stop() == 0, a.output()
    assert list(cache.glob("*.tkv")), "nothing written at shutdown"
    b = Server("--prompt-cache-dir", str(cache))
    try:
        assert b.metric("tern_prompt_cache_disk_files") >= 1
        s, again = b.post("/v1/completions", body)
        assert s == 200
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= 256
        assert again["choices"] == first["choices"]
        assert b.metric("tern_prompt_cache_disk_loads_total") >= 1
    finally:
        assert b.stop() == 0, b.output()


DRAFT = ROOT.parent / "shared" / "models" / "tern-demo-code-draft-4m"


@pytest.mark.parametrize("draft", [("--draft-kind", "ngram"), ("--draft-model", str(DRAFT))],
                         ids=["ngram", "draft-model"])
def test_speculation_is_lossless(draft):
    spec = Server(*draft, "--num-draft-tokens", "4")
    plain = Server("--prompt-cache-bytes", "0")
    try:
        code = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n"
        for b in ({"prompt": code, "max_tokens": 48}, {"prompt": code, "max_tokens": 40, "temperature": 0.8, "seed": 4},
                  {"prompt": code, "max_tokens": 32, "repetition_penalty": 1.1, "logprobs": True, "top_logprobs": 2}):
            s1, r1 = spec.post("/v1/completions", b)
            s2, r2 = plain.post("/v1/completions", b)
            assert s1 == 200 and s2 == 200
            assert r1["choices"] == r2["choices"]
            sp = r1["usage"]["speculation"]
            assert sp["target_calls"] >= 1 and 0 <= sp["accepted"] <= sp["drafted"]
            assert "speculation" not in r2["usage"]
        # A request may turn it off for itself.
        s, r = spec.post("/v1/completions", {"prompt": code, "max_tokens": 8, "num_draft_tokens": 0})
        assert s == 200 and r["usage"]["speculation"]["drafted"] == 0
        # Eight at once, greedy and seeded: each equals its plain reply.
        bodies = [{"prompt": code + f"\n# {i}\n", "max_tokens": 24 + i, **({"temperature": 0.7, "seed": i} if i % 2 else {})}
                  for i in range(8)]
        want = [plain.post("/v1/completions", b) for b in bodies]
        got = [None] * 8

        def one(i):
            got[i] = spec.post("/v1/completions", bodies[i])
        ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i in range(8):
            assert got[i][0] == 200 and got[i][1]["choices"] == want[i][1]["choices"], i
        # How much is drafted follows measured costs; the counters are there.
        assert spec.metric("tern_spec_drafted_total") >= spec.metric("tern_spec_accepted_total") >= 0
    finally:
        assert spec.stop() == 0
        assert plain.stop() == 0


def test_draft_model_needs_the_targets_tokenizer(tmp_path):
    """A draft model with another tokenizer is refused at start-up, naming
    the first id that differs."""
    import shutil
    import subprocess
    from server_harness import MODEL, TERN
    bad = tmp_path / "draft"
    bad.mkdir()
    for f in ("config.json", "model.safetensors"):
        (bad / f).symlink_to(DRAFT / f)
    tok = json.loads((DRAFT / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[300:302]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (bad / "tokenizer.json").write_text(json.dumps(tok))
    shutil.copy(DRAFT / "tokenizer_config.json", bad / "tokenizer_config.json")
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--draft-model", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "tokenizer differs" in r.stderr and "id 300" in r.stderr, r.stderr
    r = subprocess.run([str(TERN), "generate", "--model", str(MODEL), "--prompt", "x", "--draft-model", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "tokenizer differs" in r.stderr, r.stderr
    r = subprocess.run([str(TERN), "serve", "--model", str(MODEL), "--draft-kind", "model"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "needs --draft-model" in r.stderr


def test_prompt_cache_isolation_under_concurrency(srv):
    """32 concurrent clients over 8 long prefixes in random order: every reply
    equals its reference from a server without a prompt cache."""
    import random
    rng = random.Random(8)
    prefixes = ["".join(f"def p{k}_{i}(x):\n    return x + {k * 100 + i}\n\n" for i in range(14)) for k in range(8)]
    bodies = []
    for q in range(32):
        k = rng.randrange(8)
        b = {"prompt": prefixes[k] + f"# request {q}\ndef main():", "max_tokens": 10, "logit_bias": {"8187": -100}}
        if q % 2:
            b.update(temperature=0.7, seed=q)
        bodies.append(b)
    cold = Server("--prompt-cache-bytes", "0")
    try:
        refs = [cold.post("/v1/completions", b)[1]["choices"][0]["text"] for b in bodies]
    finally:
        assert cold.stop() == 0
    got = [None] * 32
    order = list(range(32))
    rng.shuffle(order)

    def run(q):
        got[q] = srv.post("/v1/completions", bodies[q])

    ts = [threading.Thread(target=run, args=(q,)) for q in order]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    hits = 0
    for q in range(32):
        status, r = got[q]
        assert status == 200, r
        assert r["choices"][0]["text"] == refs[q], q
        hits += r["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert hits >= 8
