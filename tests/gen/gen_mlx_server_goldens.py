"""Records mlx_lm.server's answers for tests/py/test_mlx_server_parity.py.

Makes a float32 copy of models/tern-demo-code-17m with tests/py/f32_model.py
(the same numpy code the test runs, so both servers load identical weights),
starts `python3 -m mlx_lm.server --model <copy> --port P` on the CPU, sends every
request of REQUESTS and writes, per request, the status code, Content-Type and
either the JSON body, the raw body (non-JSON) or the list of SSE events
(comments kept as strings, `data: {...}` parsed, `data: [DONE]` kept) to
tests/goldens/mlx_server/responses.json. Then, with the server stopped, runs
mlx_lm's own greedy generation (stream_generate, temperature 0) on the prompts of
the successful requests and writes text and token ids to
tests/goldens/mlx_server/generate.json.

Needs: pip install "mlx[cpu]" mlx-lm numpy (CPU only, a minute or two).
usage: python3 tests/gen/gen_mlx_server_goldens.py
"""
import http.client
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "py"))
from f32_model import make_f32_copy  # noqa: E402

MODEL = ROOT / "models" / "tern-demo-code-17m"
OUT = ROOT / "tests" / "goldens" / "mlx_server"

USER = [{"role": "user", "content": "Write a function that adds two numbers."}]
SYSTEM = [{"role": "system", "content": "You are a Python expert."},
          {"role": "user", "content": "Parse a CSV file and print each row."}]
# A short-answer conversation after which the demo model ends its turn (EOS) by itself.
MULTI = [{"role": "user", "content": "Say yes."}, {"role": "assistant", "content": "yes"},
         {"role": "user", "content": "Say no."}, {"role": "assistant", "content": "no"},
         {"role": "user", "content": "Say ok."}]
UNICODE = [{"role": "user", "content": "Écris une fonction qui inverse une chaîne — « merci » ✓ 你好"}]
PARTS = [{"role": "user", "content": [{"type": "text", "text": "Write a function"},
                                      {"type": "text", "text": " that adds two numbers."}]}]
FIB = "def fibonacci(n):"
MAIN = "import os\nimport sys\n\n\ndef main():\n"
LONG = "# utilities\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
EOS = "8187"  # <|im_end|>


def chat(name, body, path="/v1/chat/completions"):
    return {"name": name, "method": "POST", "path": path, "body": body}


def text(name, body):
    return {"name": name, "method": "POST", "path": "/v1/completions", "body": body}


def raw(name, data, path="/v1/chat/completions"):
    return {"name": name, "method": "POST", "path": path, "raw": data}


def get(name, path):
    return {"name": name, "method": "GET", "path": path}


def bad(name, **fields):
    return chat(name, {"messages": USER, "max_tokens": 4, **fields})


# Temperature is left at the server default (0.0) unless a request sets it.
# Not sent: a non-string/non-list "stop" (e.g. 5) kills mlx_lm.server 0.32's
# generation thread; every later request then answers 404 "generation thread died".
REQUESTS = [
    get("health", "/health"),
    get("models", "/v1/models"),
    get("models_unknown_id", "/v1/models/org/unknown"),
    get("get_unknown_route", "/v1/nope"),
    chat("post_unknown_route", {"messages": USER}, path="/v1/nope"),
    # chat, non-streamed
    chat("chat_user", {"messages": USER, "max_tokens": 24}),
    chat("chat_system", {"messages": SYSTEM, "max_tokens": 24}),
    chat("chat_multi_turn_eos", {"messages": MULTI, "max_tokens": 24}),
    chat("chat_alias_route", {"messages": USER, "max_tokens": 8}, path="/chat/completions"),
    chat("chat_max_completion_tokens", {"messages": USER, "max_completion_tokens": 5, "max_tokens": 30}),
    chat("chat_eos_first", {"messages": USER, "max_tokens": 8, "logit_bias": {EOS: 100}}),
    chat("chat_logit_bias_ban", {"messages": USER, "max_tokens": 12, "logit_bias": {"8159": -100, "606": -100}}),
    chat("chat_greedy_ignores_filters", {"messages": USER, "max_tokens": 8, "temperature": 0, "top_p": 0.5,
                                         "top_k": 5, "min_p": 0.1}),
    chat("chat_unicode", {"messages": UNICODE, "max_tokens": 24}),
    chat("chat_content_parts", {"messages": PARTS, "max_tokens": 8}),
    chat("chat_unknown_fields", {"messages": USER, "max_tokens": 6, "n": 1, "user": "u-1", "foo": {"bar": [1]}}),
    chat("chat_stop_string", {"messages": USER, "max_tokens": 24, "stop": "\n\n"}),
    chat("chat_stop_list", {"messages": USER, "max_tokens": 24, "stop": ["jax", "Toolbar:"]}),
    chat("chat_logprobs", {"messages": USER, "max_tokens": 4, "logprobs": True}),
    chat("chat_top_logprobs", {"messages": USER, "max_tokens": 4, "logprobs": True, "top_logprobs": 3}),
    chat("chat_top_logprobs_only", {"messages": SYSTEM, "max_tokens": 3, "top_logprobs": 2}),
    chat("chat_top_logprobs_zero", {"messages": USER, "max_tokens": 3, "logprobs": True, "top_logprobs": 0}),
    # chat, streamed
    chat("chat_stream", {"messages": USER, "max_tokens": 16, "stream": True}),
    chat("chat_stream_system_usage", {"messages": SYSTEM, "max_tokens": 16, "stream": True,
                                      "stream_options": {"include_usage": True}}),
    chat("chat_stream_multi_turn_eos", {"messages": MULTI, "max_tokens": 24, "stream": True}),
    chat("chat_stream_eos_first", {"messages": USER, "max_tokens": 8, "stream": True, "logit_bias": {EOS: 100}}),
    chat("chat_stream_stop", {"messages": USER, "max_tokens": 24, "stream": True, "stop": ["Toolbar:"]}),
    chat("chat_stream_logprobs", {"messages": USER, "max_tokens": 4, "stream": True, "logprobs": True}),
    chat("chat_stream_unicode", {"messages": UNICODE, "max_tokens": 16, "stream": True}),
    # raw-prompt completions
    text("text_basic", {"prompt": FIB, "max_tokens": 24}),
    text("text_long_prompt", {"prompt": LONG, "max_tokens": 12}),
    text("text_stop_token_aligned", {"prompt": FIB, "max_tokens": 24, "stop": " return"}),
    text("text_stop_mid_token", {"prompt": FIB, "max_tokens": 24, "stop": "F8"}),
    text("text_stop_list", {"prompt": MAIN, "max_tokens": 24, "stop": ["xyz", "os.environ"]}),
    text("text_logprobs", {"prompt": "for i in range(", "max_tokens": 4, "logprobs": True}),
    text("text_top_logprobs", {"prompt": "for i in range(", "max_tokens": 4, "top_logprobs": 2}),
    text("text_stream", {"prompt": MAIN, "max_tokens": 16, "stream": True}),
    text("text_stream_usage", {"prompt": FIB, "max_tokens": 8, "stream": True,
                               "stream_options": {"include_usage": True}}),
    text("text_stream_stop", {"prompt": FIB, "max_tokens": 24, "stream": True, "stop": "(n, n)"}),
    # errors
    raw("err_bad_json", "{not json"),
    raw("err_empty_body", ""),
    raw("err_not_object", "[1, 2]"),
    raw("err_text_bad_json", '{"prompt": "x",}', path="/v1/completions"),
    chat("err_no_messages", {"max_tokens": 4}),
    chat("err_empty_messages", {"messages": [], "max_tokens": 4}),
    chat("err_messages_not_list", {"messages": "hi", "max_tokens": 4}),
    chat("err_content_not_string", {"messages": [{"role": "user", "content": 5}], "max_tokens": 4}),
    text("err_no_prompt", {"max_tokens": 4}),
    bad("err_stream_type", stream="yes"),
    bad("err_stream_null", stream=None),
    bad("err_max_tokens_type", max_tokens="x"),
    bad("err_max_tokens_zero", max_tokens=0),
    bad("err_max_tokens_bool", max_tokens=True),
    bad("err_temperature_type", temperature="hot"),
    bad("err_temperature_negative", temperature=-1),
    bad("err_top_p_range", top_p=2),
    bad("err_top_k_negative", top_k=-1),
    bad("err_top_k_float", top_k=1.5),
    bad("err_min_p_range", min_p=1.5),
    bad("err_repetition_penalty_negative", repetition_penalty=-1),
    bad("err_presence_penalty_type", presence_penalty="x"),
    bad("err_logprobs_int", logprobs=1),
    bad("err_top_logprobs_high", top_logprobs=12),
    bad("err_top_logprobs_negative", top_logprobs=-2),
    bad("err_top_logprobs_type", top_logprobs="3"),
    bad("err_logit_bias_key", logit_bias={"a": 1}),
    bad("err_logit_bias_type", logit_bias=[1, 2]),
    bad("err_seed_type", seed="x"),
    bad("err_model_type", model=5),
    bad("err_xtc_probability_int", xtc_probability=1),
    bad("err_xtc_probability_range", xtc_probability=2.0),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_events(raw):
    """SSE text -> list: comment lines as strings, data JSON parsed, [DONE] as the string."""
    out = []
    for ev in raw.split("\n\n"):
        if not ev:
            continue
        if ev.startswith("data: {"):
            out.append(json.loads(ev[len("data: "):]))
        else:
            out.append(ev)
    return out


def send(port, case):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = case.get("raw")
    if body is None and "body" in case:
        body = json.dumps(case["body"])
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(case["method"], case["path"], body=body, headers=headers)
    r = c.getresponse()
    raw = r.read().decode()
    ctype = r.getheader("Content-Type")
    c.close()
    rec = {"status": r.status, "content_type": ctype}
    if ctype == "text/event-stream":
        rec["events"] = parse_events(raw)
    else:
        try:
            rec["body"] = json.loads(raw)
        except ValueError:
            rec["raw"] = raw
    return rec


def serve_and_record(model_dir, hf_cache):
    port = free_port()
    env = dict(os.environ, HF_HUB_CACHE=str(hf_cache), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "mlx_lm.server", "--model", str(model_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("mlx_lm.server did not come up")
            time.sleep(0.2)
        results = {}
        for case in REQUESTS:
            results[case["name"]] = {"request": case, **send(port, case)}
            print(case["name"], results[case["name"]]["status"], file=sys.stderr)
        return results
    finally:
        proc.terminate()
        proc.wait()


def library_generate(model_dir, results):
    """mlx_lm's own greedy generation (no stop strings) for the prompts the server answered.
    For requests with stop strings also the decoded text of every token prefix, so the
    test can tell where a stop string first appears."""
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_logits_processors, make_sampler
    model, tok = load(str(model_dir))
    out = {}
    for name, rec in results.items():
        body = rec["request"].get("body")
        if rec["status"] != 200 or not isinstance(body, dict):
            continue
        if "messages" in body:
            msgs = [dict(m, content="".join(p["text"] for p in m["content"]))
                    if isinstance(m["content"], list) else m for m in body["messages"]]
            prompt = tok.apply_chat_template(msgs, add_generation_prompt=True)
        elif "prompt" in body:
            prompt = tok.encode(body["prompt"])
        else:
            continue
        n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 512)
        bias = {int(k): float(v) for k, v in (body.get("logit_bias") or {}).items()}
        procs = make_logits_processors(logit_bias=bias or None)
        text, ids = "", []
        for r in stream_generate(model, tok, prompt, max_tokens=n, sampler=make_sampler(temp=0.0),
                                 logits_processors=procs):
            text += r.text
            ids.append(int(r.token))
        rec_out = {"prompt_ids": [int(t) for t in prompt], "max_tokens": n, "text": text, "ids": ids}
        if body.get("stop"):
            rec_out["prefix_texts"] = [tok.decode(ids[:k]) for k in range(1, len(ids) + 1)]
        out[name] = rec_out
    return out


def main():
    import mlx.core as mx
    import mlx_lm
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = make_f32_copy(MODEL, pathlib.Path(tmp) / "demo-f32")
        hf_cache = pathlib.Path(tmp) / "hf-cache"
        hf_cache.mkdir()
        results = serve_and_record(model_dir, hf_cache)
        gen = library_generate(model_dir, results)
    meta = {"mlx_lm_version": mlx_lm.__version__, "mlx_version": mx.__version__,
            "model": "models/tern-demo-code-17m as float32 (tests/py/f32_model.py)"}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "responses.json").write_text(json.dumps({**meta, "responses": results}, indent=1, ensure_ascii=False) + "\n")
    (OUT / "generate.json").write_text(json.dumps({**meta, "generate": gen}, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}/responses.json ({len(results)} responses), generate.json ({len(gen)} generations)")


if __name__ == "__main__":
    main()
