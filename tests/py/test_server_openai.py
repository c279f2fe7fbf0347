"""tern serve against the official openai client: chat and text completions,
streaming, stop strings, seeds, logprobs and tool calls on the demo model."""
import json

import openai
import pytest

from server_harness import server  # noqa: F401  (fixture)

MSGS = [{"role": "user", "content": "Write a function that adds two numbers."}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)


def test_health_and_models(server, client):  # noqa: F811
    status, body = server.get("/health")
    assert status == 200 and body == b'{"status": "ok"}'
    models = client.models.list()
    assert len(models.data) == 1 and models.data[0].id.endswith("tern-demo-code-17m")
    status, body = server.get("/v1/models/" + models.data[0].id)
    assert status == 200 and len(json.loads(body)["data"]) == 1
    status, body = server.get("/v1/models/unknown")
    assert status == 200 and json.loads(body)["data"] == []


def test_chat_non_stream(client):
    r = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=12)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "demo"
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length") and c.message.role == "assistant"
    assert isinstance(c.message.content, str) and c.message.content
    assert r.usage.completion_tokens <= 12 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_chat_stream_matches_non_stream(client):
    full = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=24)
    chunks = list(client.chat.completions.create(model="demo", messages=MSGS, max_tokens=24, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    last = chunks[-1]
    assert last.choices[0].finish_reason == full.choices[0].finish_reason
    assert last.usage.completion_tokens == full.usage.completion_tokens
    assert all(ch.object == "chat.completion.chunk" and ch.id == chunks[0].id for ch in chunks)


def test_sse_framing(server):  # noqa: F811
    events = server.sse("/v1/chat/completions", {"messages": MSGS, "max_tokens": 4, "stream": True,
                                                  "stream_options": {"include_usage": True}})
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") or e.startswith(":") for e in events)
    payloads = [json.loads(e[6:]) for e in events[:-1] if e.startswith("data: ")]
    assert payloads[0]["choices"][0]["delta"]["role"] == "assistant"
    assert payloads[-2]["choices"][0]["finish_reason"] in ("stop", "length") and "usage" in payloads[-2]
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["completion_tokens"] <= 4


def test_text_completion(client):
    r = client.completions.create(model="demo", prompt="def fibonacci(n):", max_tokens=16)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].text and r.choices[0].finish_reason in ("stop", "length")
    parts = list(client.completions.create(model="demo", prompt="def fibonacci(n):", max_tokens=16, stream=True))
    assert "".join(p.choices[0].text for p in parts if p.choices) == r.choices[0].text


def test_stop_strings(client):
    prompt = "import numpy as np\n\n\ndef"
    full = client.completions.create(model="demo", prompt=prompt, max_tokens=40).choices[0].text
    assert len(full) > 12
    stop = full[8:12]
    want = full[:full.find(stop)]
    r = client.completions.create(model="demo", prompt=prompt, max_tokens=40, stop=[stop, "never-appears"])
    assert r.choices[0].text == want and r.choices[0].finish_reason == "stop"
    parts = [p.choices[0].text for p in client.completions.create(
        model="demo", prompt=prompt, max_tokens=40, stop=stop, stream=True) if p.choices]
    assert "".join(parts) == want
    assert not any(stop in p for p in parts)


def test_stop_across_token_boundaries(client):
    full = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=30).choices[0].message.content
    # A stop string made of the end of one token and the start of the next.
    stop = full[3:9]
    r = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=30, stop=stop)
    assert r.choices[0].message.content == full[:full.find(stop)]


def test_seed_reproducible(client):
    kw = dict(model="demo", messages=MSGS, max_tokens=24, temperature=1.0)
    a = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    b = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    c = client.chat.completions.create(seed=99, **kw).choices[0].message.content
    d = client.chat.completions.create(seed=7, **kw).choices[0].message.content
    assert a == b
    assert len({a, c, d}) > 1


def test_logprobs(client):
    r = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=5, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        assert e.token == e.top_logprobs[0].token and e.logprob == e.top_logprobs[0].logprob
    r = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=5, logprobs=True)
    raw = r.choices[0].logprobs.model_dump()["content"]
    assert len(raw) == 5 and all(set(e) >= {"id", "logprob"} for e in raw)
    # Greedy: the chosen token is the best one.
    r = client.completions.create(model="demo", prompt="def f(x):", max_tokens=4, extra_body={"top_logprobs": 2})
    assert len(r.choices[0].logprobs.model_dump()["content"]) == 4


def test_logit_bias_forces_token(client):
    r = client.completions.create(model="demo", prompt="x = ", max_tokens=3, logit_bias={"15": 100})
    assert r.choices[0].text == "000"


def test_tool_call_coder_form(client):
    # The prefilled assistant turn opens a Qwen3-Coder call; the model writes the value.
    msgs = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "<function=get_weather>\n<parameter=city>\n"}]
    r = client.chat.completions.create(model="demo", messages=msgs, tools=TOOLS, max_tokens=6, stop=["\n"])
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert not c.message.content
    (call,) = c.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
    assert set(json.loads(call.function.arguments)) == {"city"}
    chunks = list(client.chat.completions.create(model="demo", messages=msgs, tools=TOOLS, max_tokens=6,
                                                 stop=["\n"], stream=True))
    assert all("<" not in (ch.choices[0].delta.content or "") for ch in chunks if ch.choices)
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "get_weather" and calls[0].index == 0
    assert json.loads(calls[0].function.arguments) == json.loads(call.function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_call_hermes_form_forced_by_logit_bias(client):
    # The prefill holds the call's JSON; logit_bias forces the closing </tool_call> token.
    msgs = [{"role": "user", "content": "Weather in Oslo for 3 days?"},
            {"role": "assistant",
             "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}\n'}]
    r = client.chat.completions.create(model="demo", messages=msgs, tools=TOOLS, max_tokens=1,
                                       logit_bias={"8191": 100})
    (call,) = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Oslo", "days": 3}


def test_unparseable_markup_is_released_as_content(client):
    r = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, max_tokens=3,
                                       logit_bias={"8190": 100})
    c = r.choices[0]
    assert c.message.content == "<tool_call>" * 3 and not c.message.tool_calls and c.finish_reason == "length"
    # Without tools, markup is ordinary text.
    r = client.chat.completions.create(model="demo", messages=MSGS, max_tokens=2, logit_bias={"8190": 100})
    assert r.choices[0].message.content == "<tool_call>" * 2


def test_errors(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="demo", messages=[], max_tokens=2)
    assert e.value.body["message"] == "messages must be a non-empty list"
    assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="demo", messages=MSGS, temperature=-1)
    assert e.value.body["message"] == "temperature must be at least 0"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="demo", messages=MSGS, top_logprobs=50, logprobs=True)
    assert "top_logprobs" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="demo", messages=MSGS, logit_bias={"x": 1})
    assert e.value.body["message"] == "logit_bias must be a dict of int to float"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="demo", prompt="x" * 40000, max_tokens=1)
    assert "too long" in e.value.body["message"]
