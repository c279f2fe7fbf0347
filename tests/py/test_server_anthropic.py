"""tern serve's /v1/messages against the official anthropic client."""
import json

import anthropic
import pytest

from server_harness import server  # noqa: F401  (fixture)

MSGS = [{"role": "user", "content": "Write a function that adds two numbers."}]


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return anthropic.Anthropic(base_url=server.base, api_key="none", max_retries=0)


def test_message(client):
    m = client.messages.create(model="claude-demo", max_tokens=10, messages=MSGS, system="You write Python.")
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_") and m.model == "claude-demo"
    assert m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert 0 < m.usage.output_tokens <= 10 and m.usage.input_tokens > 0


def test_stream_matches(client):
    m = client.messages.create(model="d", max_tokens=20, messages=MSGS)
    with client.messages.stream(model="d", max_tokens=20, messages=MSGS) as s:
        deltas = list(s.text_stream)
        final = s.get_final_message()
    assert "".join(deltas) == m.content[0].text == final.content[0].text
    assert final.stop_reason == m.stop_reason and final.usage.output_tokens == m.usage.output_tokens


def test_stop_sequences(client):
    full = client.messages.create(model="d", max_tokens=30, messages=MSGS).content[0].text
    stop = full[5:9]
    m = client.messages.create(model="d", max_tokens=30, messages=MSGS, stop_sequences=[stop])
    assert m.content[0].text == full[:full.find(stop)]
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop


def test_tool_use(client):
    tools = [{"name": "get_weather", "description": "Weather for a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    msgs = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "<function=get_weather>\n<parameter=city>\n"}]
    m = client.messages.create(model="d", max_tokens=6, messages=msgs, tools=tools, stop_sequences=["\n"])
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(uses) == 1
    assert uses[0].name == "get_weather" and set(uses[0].input) == {"city"} and uses[0].id.startswith("toolu_")
    with client.messages.stream(model="d", max_tokens=6, messages=msgs, tools=tools, stop_sequences=["\n"]) as s:
        final = s.get_final_message()
    fu = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and fu[0].input == uses[0].input
    # A tool result in the history is accepted.
    hist = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                               "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
    m = client.messages.create(model="d", max_tokens=4, messages=hist, tools=tools)
    assert m.usage.output_tokens <= 4


def test_errors(client, server):  # noqa: F811
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="d", max_tokens=4, messages=[])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    status, body = server.post("/v1/messages", {"messages": MSGS})
    assert status == 400 and body["error"]["message"] == "max_tokens: field required"
    status, body = server.post("/v1/messages", b"{not json")
    assert status == 400 and body["type"] == "error"
    status, body = server.post("/v1/messages", {"max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {}}]}]})
    assert status == 400 and "image" in body["error"]["message"]


TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
HISTORY = [{"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                             {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                              "input": {"city": "Paris"}}]},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]


@pytest.mark.parametrize("kw", [
    {"messages": MSGS},
    {"messages": MSGS, "system": "You write Python."},
    {"messages": MSGS, "system": [{"type": "text", "text": "You "}, {"type": "text", "text": "write."}]},
    {"messages": HISTORY, "tools": TOOLS},
    {"messages": MSGS + [{"role": "assistant", "content": "def add(a, b):"}]},
    {"messages": MSGS, "thinking": {"type": "disabled"}},
], ids=["plain", "system", "system-blocks", "tools-history", "prefill", "thinking"])
def test_count_tokens_is_the_prompt_messages_would_run(client, kw):
    """The official client's messages.count_tokens equals the input_tokens that
    messages.create reports for the same body."""
    n = client.messages.count_tokens(model="d", **kw)
    m = client.messages.create(model="d", max_tokens=1, **kw)
    assert n.input_tokens == m.usage.input_tokens > 0


def test_count_tokens_against_transformers(client):
    """Independent count: the chat template applied by transformers."""
    transformers = pytest.importorskip("transformers")
    from server_harness import MODEL
    tok = transformers.AutoTokenizer.from_pretrained(str(MODEL))
    msgs = [{"role": "system", "content": "You write Python."}] + MSGS
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    want = len(tok(text, add_special_tokens=False)["input_ids"])
    got = client.messages.count_tokens(model="d", messages=MSGS, system="You write Python.").input_tokens
    assert got == want


def test_count_tokens_validates_like_messages(client, server):  # noqa: F811
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.count_tokens(model="d", messages=[])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    assert "at least one message" in e.value.body["error"]["message"]
    for body, text in [(b"{not json", "Invalid JSON"), (b"[1]", "JSON dictionary"),
                       ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
                       ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image"),
                       ({"messages": MSGS, "tools": "x"}, "tools must be a list"),
                       ({"messages": MSGS, "temperature": -1}, "temperature")]:
        status, got = server.post("/v1/messages/count_tokens", body)
        assert status == 400 and got["type"] == "error" and text in got["error"]["message"], (body, got)
    # max_tokens is optional here; when given it is still checked.
    status, got = server.post("/v1/messages/count_tokens", {"messages": MSGS})
    assert status == 200 and set(got) == {"input_tokens"}
    status, got = server.post("/v1/messages/count_tokens", {"messages": MSGS, "max_tokens": 0})
    assert status == 400
    status, _ = server.get("/v1/messages/count_tokens")
    assert status == 404
