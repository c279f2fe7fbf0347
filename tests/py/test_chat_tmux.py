"""`tern chat` driven in a real terminal: tmux send-keys / capture-pane.

Replies are checked against the same greedy request made another way
(`tern generate --chat` for one user message, the server's
/v1/chat/completions for a system prompt and several turns)."""
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import ROOT, TERN

MODEL = ROOT / "models" / "tern-demo-code-17m"
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh installs it)")


class Tmux:
    def __init__(self, *args):
        self.sock = "tern-test-" + uuid.uuid4().hex[:10]
        cmd = " ".join([str(TERN), "chat", "--model", str(MODEL), *args])
        self.tmux("new-session", "-d", "-x", "220", "-y", "50", "-s", "chat", cmd)
        self.tmux("set-option", "-t", "chat", "remain-on-exit", "on")
        self.wchan = True
        self.wait_for(lambda s: s.rstrip("\n").endswith("\n>>> "), what="the first prompt")
        deadline = time.time() + 5
        while not self.reading() and time.time() < deadline:
            time.sleep(0.1)
        # Without a readable /proc/PID/wchan, "waiting at the prompt" is a screen that stays still.
        self.wchan = self.reading()

    def tmux(self, *a):
        return subprocess.run(["tmux", "-L", self.sock, *a], check=True, capture_output=True, text=True).stdout

    def screen(self):
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")

    def dead(self):
        return self.tmux("display-message", "-p", "-t", "chat", "#{pane_dead}").strip() == "1"

    def wait_for(self, cond, what, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.screen()
            if cond(s):
                return s
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}; screen:\n{self.screen()}")

    def keys(self, *k):
        self.tmux("send-keys", "-t", "chat", *k)

    def line(self, text):
        self.keys("-l", text)
        self.keys("Enter")

    def prompts(self):
        return self.screen().count("\n>>> ") + self.screen().startswith(">>> ")

    def reading(self):
        """True while tern chat waits in a terminal read (at its prompt): the
        reply's own text may hold lines that look like the prompt."""
        if not getattr(self, "wchan", True):
            before = self.screen()
            time.sleep(1.5)
            return self.screen() == before
        pid = self.tmux("display-message", "-p", "-t", "chat", "#{pane_pid}").strip()
        try:
            with open(f"/proc/{pid}/wchan") as f:
                return f.read().strip() in ("wait_woken", "n_tty_read")
        except OSError:
            return False

    def idle(self, s):
        return s.endswith("\n>>> ") and self.reading()

    def say(self, *lines):
        """Types lines, each after its prompt, and returns the reply printed before the next prompt."""
        echo = ">>> " + lines[0]
        for i, ln in enumerate(lines):
            before = len(self.screen().rstrip("\n"))
            self.line(ln)
            last = i == len(lines) - 1

            def ready(s, before=before, ln=ln, last=last):
                s = s.rstrip("\n")
                return len(s) >= before + len(ln) + 4 and s.endswith(">>> " if last else "... ") and self.reading()
            after = self.wait_for(ready, what="the reply" if last else "the continuation prompt")
        after = after.rstrip("\n")
        return reply_text(after[after.rfind(echo):], len(lines))

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


def reply_text(screen, n_lines):
    """screen: from the prompt the input was typed at to the next prompt. The
    reply is what follows the n_lines input lines, before the last line."""
    lines = screen.split("\n")
    return "\n".join(ln.rstrip() for ln in lines[n_lines:-1]).rstrip("\n")


def norm(text):
    return "\n".join(ln.rstrip() for ln in text.replace("\t", "        ").split("\n")).strip("\n")


def generate_chat(prompt, max_tokens):
    r = subprocess.run([str(TERN), "generate", "--model", str(MODEL), "--chat", "--prompt", prompt,
                        "--max-tokens", str(max_tokens), "--temperature", "0"], capture_output=True, text=True,
                       check=True)
    return norm(r.stdout)


@pytest.fixture
def chat():
    sessions = []

    def start(*args):
        s = Tmux(*args)
        sessions.append(s)
        return s
    yield start
    for s in sessions:
        s.close()


def test_reply_streams_the_greedy_answer(chat):
    t = chat("--max-tokens", "24")
    got = t.say("def fibonacci(n):")
    assert got and norm(got) == generate_chat("def fibonacci(n):", 24)


def test_multi_line_input_backslash_and_block(chat):
    want = generate_chat("import os\nimport sys", 20)
    t = chat("--max-tokens", "20")
    assert norm(t.say("import os\\", "import sys")) == want
    assert "... " in t.screen()
    t.line("/reset")
    assert norm(t.say('"""', "import os", "import sys", '"""')) == want
    # A block is never a command.
    t.line("/reset")
    assert norm(t.say('"""', "/reset", '"""')) == generate_chat("/reset", 20)


def test_reset_and_system_follow_the_chat_template(chat):
    from server_harness import Server
    import openai
    t = chat("--max-tokens", "16")
    first = t.say("class Stack:")
    second = t.say("def push(self, x):")
    t.line("/reset")
    t.wait_for(lambda s: "[conversation cleared]" in s, what="/reset")
    assert t.say("class Stack:") == first
    t.line("/reset")
    t.line("/system You write short Python.")
    t.wait_for(lambda s: "[system prompt set]" in s, what="/system")
    with_system = t.say("class Stack:")
    srv = Server()
    try:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0)

        def api(msgs):
            r = client.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
            # The server sends special tokens as text (as mlx_lm.server does); chat hides them.
            text = r.choices[0].message.content or ""
            return norm(text.replace("<|endoftext|>", "").replace("<|im_end|>", ""))
        u1 = {"role": "user", "content": "class Stack:"}
        assert norm(first).lstrip(" ") == api([u1])
        assert norm(second).lstrip(" ") == api([u1, {"role": "assistant", "content": first},
                                                 {"role": "user", "content": "def push(self, x):"}])
        assert norm(with_system).lstrip(" ") == api([{"role": "system", "content": "You write short Python."}, u1])
    finally:
        srv.stop()


def test_ctrl_c_stops_the_reply_not_the_program(chat):
    t = chat("--max-tokens", "3000")
    t.line("Write a long Python module with many classes.")
    # Wait until the reply is visibly streaming, then interrupt it.
    t.wait_for(lambda s: ">>> Write a long" in s and len(s.split(">>> Write a long", 1)[1].strip()) > 80,
               what="streamed text")
    t.keys("C-c")
    t.wait_for(lambda s: "[stopped]" in s and t.idle(s.rstrip("\n")), what="[stopped]", timeout=60)
    assert not t.dead()
    # The program goes on: commands work and the next reply streams (and stops) too.
    t.line("/reset")
    t.wait_for(lambda s: "[conversation cleared]" in s, what="/reset after the stop")
    t.line("Write another long Python module.")
    t.wait_for(lambda s: ">>> Write another" in s and len(s.split(">>> Write another", 1)[1].strip()) > 80,
               what="the second reply")
    t.keys("C-c")
    t.wait_for(lambda s: s.count("[stopped]") == 2 and t.idle(s.rstrip("\n")), what="the second [stopped]")
    # Ctrl-C at the prompt: a hint first, the second one quits.
    t.keys("C-c")
    t.wait_for(lambda s: "[Ctrl-C again" in s, what="the Ctrl-C hint")
    assert not t.dead()
    t.keys("C-c")
    t.wait_for(lambda s: t.dead(), what="exit on the second Ctrl-C", timeout=30)
    assert "Sanitizer" not in t.screen()


def test_exit_command_and_eof(chat):
    t = chat()
    t.line("/exit")
    t.wait_for(lambda s: t.dead(), what="/exit", timeout=30)
    t2 = chat()
    t2.keys("C-d")
    t2.wait_for(lambda s: t2.dead(), what="Ctrl-D", timeout=30)
    for s in (t.screen(), t2.screen()):
        assert "Sanitizer" not in s
