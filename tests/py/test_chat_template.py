"""`tern template` versus transformers' apply_chat_template, byte for byte.

Goldens come from tests/gen/gen_template_goldens.py: models.json renders the real Qwen3, Gemma 3,
Llama 3 and demo-model templates; features.json renders small templates, one interpreter feature
each, with transformers' Jinja environment. A golden that records an error expects tern to fail
(non-zero exit, a message on stderr, nothing on stdout)."""
import json
import pathlib
import subprocess

import pytest

from conftest import ROOT, SHARED

GOLDENS = ROOT / "tests" / "goldens" / "templates"


def load(name):
    return json.loads((GOLDENS / name).read_text(encoding="utf-8"))


MODEL_CASES = load("models.json")
FEATURE_CASES = load("features.json")


def run_template(tern_bin, model_dir, case, tmp_path):
    msgs = tmp_path / "messages.json"
    msgs.write_text(json.dumps(case["messages"], ensure_ascii=False), encoding="utf-8")
    cmd = [tern_bin, "template", "--model", str(model_dir), "--messages", str(msgs)]
    if case.get("tools") is not None:
        tools = tmp_path / "tools.json"
        tools.write_text(json.dumps(case["tools"], ensure_ascii=False), encoding="utf-8")
        cmd += ["--tools", str(tools)]
    if not case.get("add_generation_prompt", True):
        cmd.append("--no-generation-prompt")
    if case.get("kwargs"):
        cmd += ["--kwargs", json.dumps(case["kwargs"])]
    return subprocess.run(cmd, capture_output=True, timeout=30)


def check(proc, case):
    if "error" in case:
        assert proc.returncode != 0, f"expected failure ({case['error']}), got {proc.stdout!r}"
        assert proc.stdout == b""
        err = proc.stderr.decode("utf-8", "replace")
        assert "chat template" in err
        if case["error"].startswith("TemplateError: "):   # raise_exception: the template's own message
            assert case["error"][len("TemplateError: "):] in err
        return
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    got = proc.stdout.decode("utf-8")
    assert got == case["expected"]


@pytest.mark.parametrize("case", MODEL_CASES, ids=[c["name"] for c in MODEL_CASES])
def test_model_template(tern_bin, case, tmp_path):
    model_dir = SHARED / case["model"]
    if not (model_dir / "tokenizer_config.json").exists():
        pytest.skip(f"{model_dir} is missing")
    check(run_template(tern_bin, model_dir, case, tmp_path), case)


@pytest.mark.parametrize("case", FEATURE_CASES, ids=[c["name"] for c in FEATURE_CASES])
def test_feature_template(tern_bin, case, tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    cfg = {"chat_template": case["template"], "bos_token": case["bos_token"], "eos_token": case["eos_token"]}
    (model_dir / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    proc = run_template(tern_bin, model_dir, case, tmp_path)
    if case["name"] == "strftime" and proc.returncode == 0:
        assert proc.stdout == b"4"
        return
    check(proc, case)


def test_chat_template_jinja_file_wins(tern_bin, tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": "from config"}), encoding="utf-8")
    (model_dir / "chat_template.jinja").write_text("from file {{ messages | length }}\n", encoding="utf-8")
    proc = run_template(tern_bin, model_dir, {"messages": [{"role": "user", "content": "x"}]}, tmp_path)
    assert proc.returncode == 0 and proc.stdout == b"from file 1"


def test_named_template_list(tern_bin, tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    cfg = {"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "default!"}],
           "bos_token": {"content": "<s>", "lstrip": False}}
    (model_dir / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    proc = run_template(tern_bin, model_dir, {"messages": [{"role": "user", "content": "x"}]}, tmp_path)
    assert proc.returncode == 0 and proc.stdout == b"default!"


@pytest.mark.parametrize("template,needle", [
    ("{% if x %}unclosed", "line 1"),
    ("ok\n{{ 1 + }}", "line 2"),
    ("a\nb\n{% for x in %}{% endfor %}", "line 3"),
    ("{{ x | no_such_filter }}", "no filter named 'no_such_filter'"),
    ("{% endif %}", "unexpected tag 'endif'"),
    ("{# never closed", "comment"),
    ("{{ 'unterminated }}", "line 1"),
    ("{% include 'x.j2' %}", "not supported"),
])
def test_malformed_template(tern_bin, tmp_path, template, needle):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}), encoding="utf-8")
    proc = run_template(tern_bin, model_dir, {"messages": [{"role": "user", "content": "x"}]}, tmp_path)
    assert proc.returncode == 1 and proc.stdout == b""
    assert needle in proc.stderr.decode()


def test_bad_inputs(tern_bin, tmp_path):
    model_dir = SHARED / "models" / "tern-demo-code-17m"
    if not model_dir.exists():
        pytest.skip("demo model missing")
    bad = tmp_path / "bad.json"
    bad.write_text("[{\"role\": ", encoding="utf-8")
    proc = subprocess.run([tern_bin, "template", "--model", str(model_dir), "--messages", str(bad)],
                          capture_output=True, timeout=30)
    assert proc.returncode == 1 and b"invalid JSON" in proc.stderr
    proc = subprocess.run([tern_bin, "template", "--model", str(tmp_path / "nowhere"), "--messages", str(bad)],
                          capture_output=True, timeout=30)
    assert proc.returncode == 1
    proc = subprocess.run([tern_bin, "template", "--model", str(model_dir)], capture_output=True, timeout=30)
    assert proc.returncode == 2


def test_messages_from_stdin_and_null_kwargs(tern_bin):
    model_dir = SHARED / "models" / "tern-demo-code-17m"
    if not model_dir.exists():
        pytest.skip("demo model missing")
    proc = subprocess.run([tern_bin, "template", "--model", str(model_dir), "--messages", "-", "--kwargs", "null",
                           "--no-generation-prompt"],
                          input=b'[{"role": "user", "content": "hey"}]', capture_output=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == b"<|im_start|>user\nhey<|im_end|>\n"
