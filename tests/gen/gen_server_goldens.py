"""Records mlx_lm.server's responses for the server side-by-side test.

Makes a float32 copy of the demo model, serves it with `python -m mlx_lm.server`
(pip: mlx[cpu] mlx-lm; runs on CPU), sends the requests below at temperature 0
and writes every response (non-streamed bodies, streamed events, error bodies)
to tests/goldens/server/mlx_lm_server.json. tests/py/test_server_parity.py sends
the same requests to `tern serve --precision f32` and compares.

usage: python3 tests/gen/gen_server_goldens.py
"""
import http.client
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tern-demo-code-17m"
OUT = ROOT / "tests" / "goldens" / "server" / "mlx_lm_server.json"

CHAT = [{"role": "user", "content": "Write a function that adds two numbers."}]
CHAT2 = [{"role": "system", "content": "You are a Python expert."},
         {"role": "user", "content": "Parse a CSV file with the csv module and print each row."}]

# (name, path, body); every body is sent as given (temperature defaults to 0).
REQUESTS = [
    ("chat", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 32}),
    ("chat_system", "/v1/chat/completions", {"messages": CHAT2, "max_tokens": 48}),
    ("chat_stream", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 32, "stream": True}),
    ("chat_stream_usage", "/v1/chat/completions",
     {"messages": CHAT2, "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}}),
    ("chat_stop", "/v1/chat/completions", {"messages": CHAT2, "max_tokens": 48, "stop": ["\n\n", "csv."]}),
    ("chat_logprobs", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 6, "logprobs": True}),
    ("chat_top_logprobs", "/v1/chat/completions",
     {"messages": CHAT, "max_tokens": 6, "logprobs": True, "top_logprobs": 3}),
    ("chat_max_completion_tokens", "/v1/chat/completions", {"messages": CHAT, "max_completion_tokens": 5}),
    ("chat_tools", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, "tools": [
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "number"}}}}}]}),
    ("chat_logit_bias", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, "logit_bias": {"15": 3.5}}),
    ("chat_repetition_penalty", "/v1/chat/completions",
     {"messages": CHAT2, "max_tokens": 32, "repetition_penalty": 1.3, "repetition_context_size": 16}),
    ("text_presence_frequency", "/v1/completions",
     {"prompt": "def fibonacci(n):", "max_tokens": 32, "presence_penalty": 0.8, "frequency_penalty": 0.4}),
    ("text", "/v1/completions", {"prompt": "def fibonacci(n):", "max_tokens": 40}),
    ("text_stream", "/v1/completions", {"prompt": "import numpy as np\n\n\ndef", "max_tokens": 24, "stream": True}),
    ("text_stop", "/v1/completions", {"prompt": "class Stack:\n", "max_tokens": 48, "stop": "def "}),
    ("text_top_logprobs", "/v1/completions", {"prompt": "for i in range(", "max_tokens": 4, "top_logprobs": 2}),
    ("text_long_prompt", "/v1/completions",
     {"prompt": "# utilities\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40)), "max_tokens": 16}),
    ("err_temperature", "/v1/chat/completions", {"messages": CHAT, "temperature": -1}),
    ("err_top_p", "/v1/chat/completions", {"messages": CHAT, "top_p": 2}),
    ("err_max_tokens_type", "/v1/chat/completions", {"messages": CHAT, "max_tokens": "x"}),
    ("err_top_logprobs", "/v1/chat/completions", {"messages": CHAT, "top_logprobs": 12}),
    ("err_logprobs", "/v1/chat/completions", {"messages": CHAT, "logprobs": 1}),
    ("err_stream", "/v1/chat/completions", {"messages": CHAT, "stream": "yes"}),
    ("err_logit_bias", "/v1/chat/completions", {"messages": CHAT, "logit_bias": {"a": 1}}),
]


def f32_copy(dst):
    import mlx.core as mx
    weights = {}
    for f in sorted(MODEL.glob("*.safetensors")):
        weights.update({k: v.astype(mx.float32) for k, v in mx.load(str(f)).items()})
    mx.save_safetensors(str(dst / "model.safetensors"), weights)
    cfg = json.loads((MODEL / "config.json").read_text())
    cfg["dtype"] = cfg["torch_dtype"] = "float32"
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    for n in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(MODEL / n, dst / n)


def send(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode()
    c.close()
    if body.get("stream") and r.status == 200:
        events = [e for e in raw.split("\n\n") if e]
        return {"status": r.status, "events": [e if not e.startswith("data: {") else json.loads(e[6:]) for e in events]}
    return {"status": r.status, "body": json.loads(raw)}


def main():
    import mlx_lm
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        f32_copy(pathlib.Path(tmp))
        proc = subprocess.Popen([sys.executable, "-m", "mlx_lm.server", "--model", tmp, "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/health")
                    break
                except OSError:
                    time.sleep(0.1)
            results = {name: {"path": path, "request": body, **send(port, path, body)} for name, path, body in REQUESTS}
        finally:
            proc.terminate()
            proc.wait()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"mlx_lm_version": mlx_lm.__version__, "responses": results}, indent=1) + "\n")
    print(f"wrote {OUT} ({len(results)} responses)")


if __name__ == "__main__":
    main()
