"""Side by side with mlx_lm.server: the requests of tests/gen/gen_server_goldens.py
sent to `tern serve --precision f32` give the same JSON keys and value types as
the recorded mlx_lm.server responses (float32 copy of the demo model), and at
temperature 0 the same text, token counts, finish reasons and error messages.

Known, deliberate differences: tern streams a first {"role", "content": ""}
delta (as OpenAI does), reports cached_tokens 0 (no prompt cache yet), sorts
top_logprobs best first (mlx_lm leaves them in argpartition order), words its
keepalive comments differently, and wraps errors as {"error": {"message", "type", ...}}
where mlx_lm.server writes {"error": "<message>"}. Stop strings: tern matches
them on decoded text and stops (the mlx-bun contract); mlx_lm.server 0.32 stops
only when the stop string's own token sequence is generated and otherwise
deletes the string from the text and goes on, so where it did not stop tern's
reply must be a prefix of its text. Logprobs agree to 1e-2 (both float32, with
different summation orders)."""
import json
import pathlib

import pytest

from server_harness import Server

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "goldens" / "server" / "mlx_lm_server.json"
CASES = json.loads(GOLDEN.read_text())["responses"]
VOLATILE = {"id", "created", "system_fingerprint"}


@pytest.fixture(scope="module")
def srv():
    s = Server("--precision", "f32")
    yield s
    assert s.stop() == 0, s.output()


def shape(v):
    """The JSON structure with values replaced by their types."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v[:1]]
    if isinstance(v, bool) or v is None:
        return type(v).__name__
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def send(srv, case):
    c = srv.conn(timeout=120)
    c.request("POST", case["path"], body=json.dumps(case["request"]), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode()
    c.close()
    if case["request"].get("stream") and r.status == 200:
        events = [e for e in raw.split("\n\n") if e and not e.startswith(":")]
        return r.status, [e if not e.startswith("data: {") else json.loads(e[6:]) for e in events]
    return r.status, json.loads(raw)


def text_of(body):
    ch = body["choices"][0]
    return ch["text"] if "text" in ch else ch["message"]["content"]


def check_logprobs(mine, theirs):
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert set(a) == set(b)
        if "top_logprobs" in b:
            ta = {e["id"]: e["logprob"] for e in a["top_logprobs"]}
            tb = {e["id"]: e["logprob"] for e in b["top_logprobs"]}
            assert set(ta) == set(tb)
            assert all(abs(ta[k] - tb[k]) < 1e-2 for k in ta), (ta, tb)
            assert {e["token"] for e in a["top_logprobs"]} == {e["token"] for e in b["top_logprobs"]}
        else:
            assert a["id"] == b["id"] and abs(a["logprob"] - b["logprob"]) < 1e-2


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["status"] == 200 and "body" in c])
def test_non_stream(srv, name):
    case = CASES[name]
    status, mine = send(srv, case)
    theirs = case["body"]
    assert status == 200
    usage_t = dict(theirs["usage"])
    usage_m = dict(mine["usage"])
    assert shape(mine) == shape(theirs)
    for k in set(theirs) - VOLATILE - {"choices", "usage"}:
        assert mine[k] == theirs[k], k
    if (case["request"].get("stop") and theirs["choices"][0]["finish_reason"] != "stop"
            and mine["choices"][0]["finish_reason"] == "stop"):
        assert text_of(theirs).startswith(text_of(mine))
        return
    assert text_of(mine) == text_of(theirs)
    assert mine["choices"][0]["finish_reason"] == theirs["choices"][0]["finish_reason"]
    usage_t["prompt_tokens_details"] = usage_m["prompt_tokens_details"] = None
    assert usage_m == usage_t
    if "logprobs" in theirs["choices"][0]:
        check_logprobs(mine["choices"][0]["logprobs"]["content"], theirs["choices"][0]["logprobs"]["content"])


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["status"] == 200 and "events" in c])
def test_stream(srv, name):
    case = CASES[name]
    status, mine = send(srv, case)
    theirs = [e for e in case["events"] if not (isinstance(e, str) and e.startswith(":"))]
    assert status == 200 and mine[-1] == theirs[-1] == "data: [DONE]"
    mine, theirs = mine[:-1], theirs[:-1]
    if case["path"] == "/v1/chat/completions":
        # tern's extra role-first chunk.
        assert mine[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        mine = mine[1:]

    def chunks(evs):
        return [e for e in evs if e["choices"]]

    def joined(evs):
        return "".join(e["choices"][0].get("text", e["choices"][0].get("delta", {}).get("content", ""))
                       for e in chunks(evs))

    assert joined(mine) == joined(theirs)
    assert {json.dumps(shape(e), sort_keys=True) for e in chunks(mine)[:-1]} == \
        {json.dumps(shape(e), sort_keys=True) for e in chunks(theirs)[:-1]}
    last_m, last_t = chunks(mine)[-1], chunks(theirs)[-1]
    assert last_m["choices"][0]["finish_reason"] == last_t["choices"][0]["finish_reason"]
    # tern adds usage to the final chunk; otherwise the same keys.
    last_m = {k: v for k, v in last_m.items() if k != "usage"}
    assert shape(last_m) == shape(last_t)
    usage_t = [e for e in theirs if not e["choices"]]
    usage_m = [e for e in mine if not e["choices"]]
    assert len(usage_m) == len(usage_t)
    for a, b in zip(usage_m, usage_t):
        assert shape(a) == shape(b)
        assert a["usage"]["prompt_tokens"] == b["usage"]["prompt_tokens"]
        assert a["usage"]["completion_tokens"] == b["usage"]["completion_tokens"]


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["status"] != 200])
def test_errors(srv, name):
    case = CASES[name]
    status, mine = send(srv, case)
    assert status == case["status"]
    assert mine["error"]["message"] == case["body"]["error"]
