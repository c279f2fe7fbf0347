"""Side by side with mlx_lm.server on a float32 copy of the demo model.

tests/gen/gen_mlx_server_goldens.py sent a fixed set of requests to
`python3 -m mlx_lm.server` (mlx-lm 0.32, CPU) serving a float32 copy of
models/tern-demo-code-17m and recorded every answer in
tests/goldens/mlx_server/responses.json, plus mlx_lm's own greedy generation for
the same prompts in generate.json. This test writes the same float32 copy with
numpy (tests/py/f32_model.py; config.json dtype float32, so tern keeps the rotary
frequencies in float32 as mlx-lm does), starts `build/tern serve` on it, replays
every request and checks:

- the same status code;
- the same JSON keys and value types, recursively (values of id, created,
  system_fingerprint and prompt_tokens_details.cached_tokens are not compared:
  they are per-run, and cached_tokens depends on mlx_lm's prompt cache state);
- the same object, model, finish_reason, prompt/completion/total token counts,
  logprob ids (logprob values to 1e-4) and, at temperature 0, the same text, also
  equal to mlx_lm's library generation;
- streams: comments ignored (both send `: keepalive` comments), every data event
  JSON until a final `data: [DONE]`, the same chunk shapes, the same joined text
  and finish_reason, usage chunks (choices []) as mlx_lm sends them;
- errors: status and, where mlx_lm writes a message of its own validation (not a
  Python exception text), the same message.

Deliberate differences (tern follows the issue and the mlx-bun spec there):
- Errors are {"error": {"message", "type", "param", "code"}}; mlx_lm writes
  {"error": "<message>"}, and a plain-text "Not Found" for unknown routes.
- Chat streams start with a {"role": "assistant", "content": ""} delta (as OpenAI
  does); mlx_lm's first delta already carries text. Every stream's final
  choice chunk carries usage (mlx_lm only sends usage, as a separate choices []
  chunk, when stream_options.include_usage is set; tern then sends that chunk too).
- top_logprobs: tern's entry (id, token, logprob) is the generated token and its
  list is sorted best first; mlx_lm 0.32 takes the entry from the first element of
  an unsorted argpartition, i.e. often not the generated token. Compared as sets.
- /v1/models entries carry OpenAI's "owned_by"; `/v1/models/<id>` filters the
  served model too (mlx_lm applies the filter only to Hugging Face cache entries
  and always lists its --model).
- Empty messages and non-string content are 400 (mlx_lm: 404 with a Python
  exception text). max_tokens: true is rejected as not an int (Python's bool is
  an int, so mlx_lm accepts it as 1). "stream": null means absent (mlx_lm: 400).
  Integer xtc_probability is accepted (mlx_lm requires a JSON float).
- Stop strings are matched on decoded text and end generation (mlx-bun §1.5).
  mlx_lm 0.32 ends only when the stop string's own token sequence is generated,
  otherwise deletes each occurrence from the text and goes on to max_tokens; and
  when it does end, it drops text still held by its detokenizer. So for requests
  with stop strings the expectation is mlx_lm's unstopped greedy text
  (generate.json) cut before the first stop string, finish_reason "stop", and
  completion_tokens = tokens up to the one that completed the stop string.
- Not sent by the generator: a non-string "stop" (5) kills mlx_lm.server's
  generation thread (every later request: 404 "generation thread died"); tern
  answers 400.
"""
import http.client
import json
import os
import pathlib
import tempfile

import pytest

from f32_model import make_f32_copy
from server_harness import TERN, Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tern-demo-code-17m"
GOLDEN = ROOT / "tests" / "goldens" / "mlx_server"
CASES = json.loads((GOLDEN / "responses.json").read_text())["responses"]
LIBRARY = json.loads((GOLDEN / "generate.json").read_text())["generate"]

VOLATILE = {"id", "created", "system_fingerprint"}
LOGPROB_TOL = 1e-4

# Status codes tern answers on purpose where mlx_lm.server differs (see the docstring).
STATUS = {
    "err_empty_messages": 400,
    "err_content_not_string": 400,
    "err_max_tokens_bool": 400,
    "err_stream_null": 200,
    "err_xtc_probability_int": 200,
}
# mlx_lm messages that are Python exception texts, not a message of its own.
PYTHON_MESSAGES = {"err_empty_messages", "err_messages_not_list", "err_content_not_string"}
# Requests whose generation ends with the end-of-sequence token: mlx_lm counts that
# token in usage.completion_tokens, and so must tern (see test_eos_completion_tokens).
EOS_ID = json.loads((MODEL / "config.json").read_text())["eos_token_id"]
EOS_CASES = {n for n, g in LIBRARY.items() if g["ids"] and g["ids"][-1] == EOS_ID}


class TernServer(Server):
    """`tern serve` on the float32 copy, at its default precision."""

    def __init__(self, model_dir):
        super().__init__(model=model_dir, env={k: v for k, v in os.environ.items() if k != "TERN_PRECISION"})

    def send(self, case):
        """Replays one recorded request; returns (status, content type, raw body text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            body = case.get("raw")
            if body is None and "body" in case:
                body = json.dumps(case["body"])
            headers = {"Content-Type": "application/json"} if body is not None else {}
            c.request(case["method"], case["path"], body=body, headers=headers)
            r = c.getresponse()
            return r.status, r.getheader("Content-Type"), r.read().decode()
        finally:
            c.close()


@pytest.fixture(scope="module")
def model_dir():
    with tempfile.TemporaryDirectory(prefix="tern-mlx-parity-") as tmp:  # 68 MB, removed afterwards
        yield make_f32_copy(MODEL, pathlib.Path(tmp) / "demo-f32").resolve()


@pytest.fixture(scope="module")
def tern(model_dir):
    s = TernServer(model_dir)
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def replies(tern):
    """Every recorded request replayed once against tern, in the recorded order."""
    return {name: tern.send(case["request"]) for name, case in CASES.items()}


# ---------------------------------------------------------------- comparison

def shape(v, path=""):
    """The JSON structure with values replaced by type names (numbers: int or float,
    logprob values: number). Lists become the shapes of their elements."""
    if isinstance(v, dict):
        return {k: shape(x, f"{path}.{k}") for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x, path) for x in v]
    if path.endswith("logprob") and isinstance(v, (int, float)) and not isinstance(v, bool):
        return "number"
    return type(v).__name__


def parse_events(raw):
    out = []
    for ev in raw.split("\n\n"):
        if not ev:
            continue
        out.append(json.loads(ev[len("data: "):]) if ev.startswith("data: {") else ev)
    return out


def data_events(events):
    """Drops SSE comments; checks the rest is JSON chunks then `data: [DONE]`."""
    evs = [e for e in events if not (isinstance(e, str) and e.startswith(":"))]
    assert evs and evs[-1] == "data: [DONE]", evs[-3:]
    assert all(isinstance(e, dict) for e in evs[:-1]), [e for e in evs[:-1] if not isinstance(e, dict)]
    return evs[:-1]


def stops_of(req):
    s = req.get("stop") or []
    return [s] if isinstance(s, str) else s


def stop_expectation(name):
    """(text, completion_tokens) a request with stop strings should give: mlx_lm's
    unstopped greedy text cut before the first stop string."""
    lib = LIBRARY[name]
    stops = stops_of(CASES[name]["request"]["body"])
    # prefix_texts are plain decodes; mlx_lm's streaming detokenizer (and tern) drop
    # one leading space of the reply.
    full = lib["prefix_texts"][-1]
    lead = 0 if full.startswith(lib["text"]) else 1
    assert full[lead:].startswith(lib["text"])
    for k, t in enumerate(lib["prefix_texts"], 1):
        hits = [t.find(s) for s in stops if s in t[lead:]]
        if hits:
            return t[:min(hits)][lead:], k
    return lib["text"], len(lib["ids"])


def choice_text(body):
    ch = body["choices"][0]
    return ch["text"] if "text" in ch else ch["message"]["content"]


def stream_text(chunks):
    return "".join(c["choices"][0].get("text") or c["choices"][0].get("delta", {}).get("content") or ""
                   for c in chunks if c["choices"])


def without_volatile(d):
    return {k: v for k, v in d.items() if k not in VOLATILE}


def check_usage(mine, theirs, name, counts=True):
    assert shape(mine) == shape(theirs), name
    assert mine["prompt_tokens"] == theirs["prompt_tokens"], name
    assert isinstance(mine["prompt_tokens_details"]["cached_tokens"], int)
    if counts:
        assert mine["completion_tokens"] == theirs["completion_tokens"], name
        assert mine["total_tokens"] == theirs["total_tokens"], name
    assert mine["total_tokens"] == mine["prompt_tokens"] + mine["completion_tokens"]


def check_logprobs(mine, theirs, generated_ids):
    """mine/theirs: choices[0].logprobs.content lists."""
    assert len(mine) == len(theirs) == len(generated_ids)
    for a, b, gid in zip(mine, theirs, generated_ids):
        assert set(a) == set(b), (a, b)
        if "top_logprobs" not in b:
            assert a["id"] == b["id"] == gid
            assert abs(a["logprob"] - b["logprob"]) < LOGPROB_TOL, (a, b)
            continue
        ta = {e["id"]: e for e in a["top_logprobs"]}
        tb = {e["id"]: e for e in b["top_logprobs"]}
        assert set(ta) == set(tb), (a, b)
        for i in ta:
            assert ta[i]["token"] == tb[i]["token"]
            assert abs(ta[i]["logprob"] - tb[i]["logprob"]) < LOGPROB_TOL, (ta[i], tb[i])
        lps = [e["logprob"] for e in a["top_logprobs"]]
        assert lps == sorted(lps, reverse=True)
        # tern's entry is the generated (greedy: best) token.
        assert a["id"] == gid == a["top_logprobs"][0]["id"]
        assert {k: a[k] for k in ("id", "token", "logprob")} == a["top_logprobs"][0]
        best = max(b["top_logprobs"], key=lambda e: e["logprob"])
        assert best["id"] == gid


# ---------------------------------------------------------------- tests

def test_f32_copy_matches_checkpoint(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["dtype"] == cfg["torch_dtype"] == "float32"
    assert (model_dir / "tokenizer.json").read_bytes() == (MODEL / "tokenizer.json").read_bytes()


def test_all_recorded_requests_replayed(replies):
    assert set(replies) == set(CASES)
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", sorted(CASES))
def test_status(replies, name):
    status, ctype, raw = replies[name]
    want = STATUS.get(name, CASES[name]["status"])
    assert status == want, (name, raw[:300])
    if CASES[name]["content_type"] == "text/event-stream" and status == 200:
        assert ctype == "text/event-stream"
    else:
        assert ctype.startswith("application/json"), ctype


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c["status"] >= 400 or n in STATUS))
def test_error_body(replies, name):
    case = CASES[name]
    status, _, raw = replies[name]
    if status == 200:  # accepted on purpose (STATUS); a normal chat reply
        body = json.loads(raw)
        assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] in ("stop", "length")
        return
    err = json.loads(raw)["error"]
    assert set(err) >= {"message", "type"} and isinstance(err["message"], str) and isinstance(err["type"], str)
    assert err["message"]
    theirs = case.get("body", {}).get("error") if "body" in case else None
    if theirs is None or name in PYTHON_MESSAGES:
        if name == "err_max_tokens_bool":
            assert err["message"] == "max_tokens must be of type int"
        return
    if theirs.startswith("Invalid JSON in request body:"):
        # The parser's own words after the prefix differ (Python json vs jansson).
        assert err["message"].startswith("Invalid JSON in request body:"), err
    else:
        assert err["message"] == theirs


def test_unknown_route_bodies(replies):
    for name in ("get_unknown_route", "post_unknown_route"):
        assert CASES[name]["raw"] == "Not Found"
        assert json.loads(replies[name][2])["error"]["message"] == "Not Found"


def test_health(replies):
    status, _, raw = replies["health"]
    assert status == 200 and raw == '{"status": "ok"}'
    assert json.loads(raw) == CASES["health"]["body"]


def test_models(replies, model_dir):
    theirs = CASES["models"]["body"]
    mine = json.loads(replies["models"][2])
    assert mine["object"] == theirs["object"] == "list"
    assert len(mine["data"]) == len(theirs["data"]) == 1
    m, t = mine["data"][0], theirs["data"][0]
    assert set(m) - set(t) == {"owned_by"} and set(t) <= set(m)
    assert {k: shape(m[k]) for k in t} == shape(t)
    assert m["object"] == "model"
    assert m["id"] == str(model_dir)  # mlx_lm: str(Path(--model).resolve())
    # mlx_lm lists its --model whatever the filter; tern filters.
    assert json.loads(replies["models_unknown_id"][2]) == {"object": "list", "data": []}


NON_STREAM = sorted(n for n, c in CASES.items()
                    if c["status"] == 200 and isinstance(c.get("body"), dict) and "choices" in c["body"]
                    and n not in STATUS)


@pytest.mark.parametrize("name", NON_STREAM)
def test_non_stream(replies, name):
    case = CASES[name]
    req = case["request"]["body"]
    theirs = case["body"]
    status, _, raw = replies[name]
    assert status == 200
    mine = json.loads(raw)
    assert set(mine) == set(theirs)
    for k in set(theirs) - VOLATILE - {"choices", "usage"}:
        assert mine[k] == theirs[k], k
    assert mine["id"].startswith("chatcmpl-" if theirs["object"] == "chat.completion" else "cmpl-")
    assert isinstance(mine["created"], int) and isinstance(mine["system_fingerprint"], str)
    mc, tc = mine["choices"][0], theirs["choices"][0]
    assert len(mine["choices"]) == 1
    assert set(mc) == set(tc), (mc.keys(), tc.keys())
    if "message" in tc:
        assert set(mc["message"]) == set(tc["message"])
        assert mc["message"]["role"] == "assistant"
    assert mc["index"] == 0

    if stops_of(req):
        text, ntok = stop_expectation(name)
        assert choice_text(mine) == text
        assert mc["finish_reason"] == "stop"
        assert mine["usage"]["completion_tokens"] == ntok
        check_usage(mine["usage"], theirs["usage"], name, counts=False)
        return

    assert shape(without_volatile(mine)) == shape(without_volatile(theirs))
    assert choice_text(mine) == choice_text(theirs)
    assert (choice_text(mine) or "") == LIBRARY[name]["text"]
    assert mc["finish_reason"] == tc["finish_reason"]
    check_usage(mine["usage"], theirs["usage"], name, counts=name not in EOS_CASES)
    if "logprobs" in tc:
        ids = LIBRARY[name]["ids"]
        check_logprobs(mc["logprobs"]["content"], tc["logprobs"]["content"], ids)


@pytest.mark.parametrize("name", sorted(EOS_CASES))
def test_eos_completion_tokens(replies, name):
    case = CASES[name]
    if "events" in case:
        mine = [e for e in data_events(parse_events(replies[name][2])) if e["choices"]][-1]
    else:
        mine = json.loads(replies[name][2])
        assert case["body"]["usage"]["completion_tokens"] == len(LIBRARY[name]["ids"])
    assert mine["choices"][0]["finish_reason"] == "stop"
    assert mine["usage"]["completion_tokens"] == len(LIBRARY[name]["ids"])


STREAM = sorted(n for n, c in CASES.items() if c["content_type"] == "text/event-stream")


@pytest.mark.parametrize("name", STREAM)
def test_stream(replies, name):
    case = CASES[name]
    req = case["request"]["body"]
    status, _, raw = replies[name]
    assert status == 200
    theirs = data_events(case["events"])
    mine = data_events(parse_events(raw))
    chat = case["request"]["path"].endswith("chat/completions")
    chunk_object = "chat.completion.chunk" if chat else "text_completion"
    assert len({e["id"] for e in mine}) == 1
    assert mine[0]["id"].startswith("chatcmpl-" if chat else "cmpl-")

    if chat:
        first = mine.pop(0)
        assert first["object"] == chunk_object
        assert first["choices"] == [{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": ""}}]

    m_usage = [e for e in mine if not e["choices"]]
    t_usage = [e for e in theirs if not e["choices"]]
    m_chunks = [e for e in mine if e["choices"]]
    t_chunks = [e for e in theirs if e["choices"]]
    # Chunks with choices first, then at most one usage chunk.
    assert mine[:len(m_chunks)] == m_chunks

    # Content chunks: same shape as mlx_lm's, finish_reason null.
    t_shapes = {json.dumps(shape(without_volatile(e)), sort_keys=True) for e in t_chunks[:-1]}
    m_shapes = {json.dumps(shape(without_volatile(e)), sort_keys=True) for e in m_chunks[:-1]}
    for e in m_chunks[:-1]:
        assert e["object"] == chunk_object and e["model"] == theirs[0]["model"]
        assert e["choices"][0]["finish_reason"] is None
        assert set(e["choices"][0]) == {"index", "finish_reason", "delta" if chat else "text"}
        if chat:
            assert e["choices"][0]["delta"]["role"] == "assistant"
    if t_shapes and m_shapes:  # (stop cases may end before mlx_lm's first chunk)
        assert m_shapes == t_shapes

    # The final choice chunk: finish_reason, same keys as mlx_lm's plus usage.
    m_last, t_last = m_chunks[-1], t_chunks[-1]
    assert set(m_last) - set(t_last) == {"usage"}
    assert shape(without_volatile({k: v for k, v in m_last.items() if k != "usage"})) == \
        shape(without_volatile(t_last))
    if chat:
        assert m_last["choices"][0]["delta"].get("role") == "assistant"

    if stops_of(req):
        text, ntok = stop_expectation(name)
        assert stream_text(m_chunks) == text
        assert m_last["choices"][0]["finish_reason"] == "stop"
        assert m_last["usage"]["completion_tokens"] == ntok
    else:
        assert stream_text(m_chunks) == stream_text(t_chunks) == LIBRARY[name]["text"]
        assert m_last["choices"][0]["finish_reason"] == t_last["choices"][0]["finish_reason"]

    # Usage: on tern's final chunk always; as a separate chunk exactly when mlx_lm sends one.
    assert len(m_usage) == len(t_usage) <= 1
    for mu, tu in zip(m_usage, t_usage):
        assert shape(without_volatile(mu)) == shape(without_volatile(tu))
        assert mu["object"] == tu["object"] and mu["model"] == tu["model"]
        check_usage(mu["usage"], tu["usage"], name, counts=name not in EOS_CASES)
        assert mu["usage"] == m_last["usage"]
    u = m_last["usage"]
    assert set(u) == {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}
    lib = LIBRARY[name]
    assert u["prompt_tokens"] == len(lib["prompt_ids"])
    if not stops_of(req) and name not in EOS_CASES:
        assert u["completion_tokens"] == len(lib["ids"])


def test_library_text_matches_server(replies):
    """mlx_lm's library generation and mlx_lm.server agree (apart from stop strings and
    empty content = null), so the text checks above hold against both."""
    for name, lib in LIBRARY.items():
        case = CASES[name]
        if stops_of(case["request"]["body"]):
            continue
        if "events" in case:
            got = stream_text(data_events(case["events"]))
        else:
            got = choice_text(case["body"]) or ""
        assert got == lib["text"], name
