"""Reasoning: with a thinking chat template, text inside <think>...</think> goes
to the `reasoning` field (message and stream deltas), and --chat-template-args /
chat_template_kwargs switch thinking off. Uses the demo model's weights with a
Qwen3-style thinking template written to a temporary model directory."""
import json

import openai
import pytest

from server_harness import MODEL, Server

TEMPLATE = (
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}")
MSGS = [{"role": "user", "content": "Write a function that adds two numbers."}]


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("thinking-model")
    for f in MODEL.iterdir():
        if f.name != "tokenizer_config.json":
            (d / f.name).symlink_to(f)
    cfg = json.loads((MODEL / "tokenizer_config.json").read_text())
    cfg["chat_template"] = TEMPLATE
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d


@pytest.fixture(scope="module")
def client(thinking_model):
    s = Server(model=thinking_model)
    yield openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0)
    assert s.stop() == 0, s.output()


def test_reasoning_field(client):
    r = client.chat.completions.create(model="d", messages=MSGS, max_tokens=8)
    msg = r.choices[0].message.model_dump()
    assert msg["reasoning"] and msg["content"] is None
    chunks = list(client.chat.completions.create(model="d", messages=MSGS, max_tokens=8, stream=True))
    deltas = [c.choices[0].delta.model_dump() for c in chunks if c.choices]
    assert "".join(d.get("reasoning") or "" for d in deltas) == msg["reasoning"]
    assert not "".join(d.get("content") or "" for d in deltas)


def test_closing_tag_moves_to_content(client):
    # logit_bias forces </think> first; what follows is content, and no tag leaks.
    r = client.chat.completions.create(model="d", messages=MSGS, max_tokens=6,
                                       logit_bias={"8189": 100}, stop=["never"])
    msg = r.choices[0].message.model_dump()
    assert not msg.get("reasoning")
    assert msg["content"] == "</think>" * 5


def test_thinking_off_by_kwargs(client):
    r = client.chat.completions.create(model="d", messages=MSGS, max_tokens=8,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    msg = r.choices[0].message.model_dump()
    assert msg["content"] and not msg.get("reasoning")
    with_thinking = client.chat.completions.create(model="d", messages=MSGS, max_tokens=8)
    assert r.usage.prompt_tokens > with_thinking.usage.prompt_tokens


def test_thinking_off_by_server_flag(thinking_model):
    s = Server("--chat-template-args", '{"enable_thinking": false}', model=thinking_model)
    try:
        c = openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0)
        msg = c.chat.completions.create(model="d", messages=MSGS, max_tokens=8).choices[0].message.model_dump()
        assert msg["content"] and not msg.get("reasoning")
        # The request's kwargs win over the server's.
        msg = c.chat.completions.create(model="d", messages=MSGS, max_tokens=8, extra_body={
            "chat_template_kwargs": {"enable_thinking": True}}).choices[0].message.model_dump()
        assert msg["reasoning"]
    finally:
        assert s.stop() == 0
