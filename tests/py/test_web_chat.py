"""The chat page at GET / of tern serve, in a headless Chromium: the page
streams a reply through /v1/chat/completions, which must be the reply the API
gives for the same greedy request, renders it (checked on a screenshot), stops
on the Stop button and carries the conversation into the next turn."""
import os
import pathlib
import urllib.parse

import openai
import pytest

from cdp import Browser, chromium_path, png_pixels
from server_harness import server  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(chromium_path() is None,
                                reason="chromium is not installed (scripts/setup.sh installs it)")
PROMPT = "def fibonacci(n):"


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def api_reply(server, messages, max_tokens):  # noqa: F811
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    stream = client.chat.completions.create(model="m", messages=messages, max_tokens=max_tokens, temperature=0,
                                            stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def open_chat(browser, server, **params):  # noqa: F811
    browser.navigate(server.base + "/?" + urllib.parse.urlencode(params))


def test_page_is_served(server):  # noqa: F811
    status, body = server.get("/")
    assert status == 200 and body.startswith(b"<!doctype html>")
    src = pathlib.Path(__file__).resolve().parents[2] / "src" / "server" / "web" / "chat.html"
    assert body == src.read_bytes()  # the file in the repository, byte for byte
    assert b"http://" not in body and b"https://" not in body  # no external assets


def test_reply_streams_renders_and_matches_the_api(browser, server, tmp_path):  # noqa: F811
    want = api_reply(server, [{"role": "user", "content": PROMPT}], 40)
    assert want.strip()
    open_chat(browser, server, prompt=PROMPT, max_tokens=40, temperature=0)
    browser.wait("document.body.dataset.state === 'done'")
    got = browser.eval("document.querySelector('.msg.assistant .content').textContent")
    assert got == want
    assert browser.eval("document.querySelector('.msg.user').textContent") == PROMPT
    stats = browser.eval("document.getElementById('stats').textContent")
    assert "tokens" in stats and "tok/s" in stats and "prompt" in stats, stats
    tps = float(stats.split(" tok/s")[0].split()[-1])
    assert tps > 0
    browser.wait("document.getElementById('model').textContent.length > 0")

    png = browser.screenshot()
    out_dir = pathlib.Path(os.environ.get("TERN_SCREENSHOT_DIR", tmp_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "web_chat.png").write_bytes(png)
    px = png_pixels(png)[:, :, :3].astype(int)
    scale = px.shape[1] / browser.eval("window.innerWidth")

    def region(selector):
        r = browser.eval(f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect();"
                         " return [r.left, r.top, r.right, r.bottom]; })()")
        x0, y0, x1, y1 = (int(v * scale) for v in r)
        return px[y0:y1, x0:x1]
    bubble = region(".msg.assistant")
    assert bubble.size, "the reply bubble is not on screen"
    dark = (bubble.sum(axis=2) < 300).mean()
    light = (bubble.sum(axis=2) > 700).mean()
    # Text on a light bubble: mostly background, and a real share of glyph pixels.
    assert light > 0.5 and dark > 0.01, (light, dark)
    user = region(".msg.user")
    blue = ((user[:, :, 2] > user[:, :, 0] + 20)).mean()
    assert blue > 0.5  # the user's bubble is drawn in its colour


def test_stop_button_aborts_the_stream(browser, server):  # noqa: F811
    open_chat(browser, server, prompt="Write a long Python module with many classes.", max_tokens=3000,
              temperature=0)
    browser.wait("(document.querySelector('.msg.assistant .content') || {textContent: ''}).textContent.length > 40")
    assert browser.eval("document.getElementById('stop').disabled") is False
    browser.eval("document.getElementById('stop').click()")
    browser.wait("document.body.dataset.state === 'done'", timeout=30)
    assert browser.eval("document.querySelector('.msg.assistant .note').textContent") == "[stopped]"
    shown = browser.eval("document.querySelector('.msg.assistant .content').textContent")
    assert 40 < len(shown) < 10000
    assert browser.eval("document.getElementById('send').disabled") is False
    # The server goes on: the next request is answered.
    assert server.get("/health")[0] == 200


def test_second_turn_sends_the_conversation(browser, server):  # noqa: F811
    open_chat(browser, server, prompt=PROMPT, max_tokens=16, temperature=0)
    browser.wait("document.body.dataset.state === 'done'")
    first = browser.eval("document.querySelector('.msg.assistant .content').textContent")
    browser.eval("document.getElementById('input').value = 'def add(a, b):';"
                 "document.getElementById('form').requestSubmit()")
    browser.wait("document.querySelectorAll('.msg.assistant').length === 2 && document.body.dataset.state === 'done'")
    second = browser.eval("document.querySelectorAll('.msg.assistant .content')[1].textContent")
    want = api_reply(server, [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": first},
                              {"role": "user", "content": "def add(a, b):"}], 16)
    assert second == want


def test_errors_are_shown(browser, server):  # noqa: F811
    open_chat(browser, server, prompt="x", max_tokens=0)
    browser.wait("document.body.dataset.state === 'done'")
    assert browser.eval("document.querySelector('.msg.assistant').classList.contains('error')")
    assert "max_tokens" in browser.eval("document.querySelector('.msg.assistant').textContent")
