"""Model names looked up in the Hugging Face hub cache: ORG/NAME[@REVISION]
through HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub, with refs/main,
another ref, or a commit hash under snapshots/. Nothing is downloaded: a model
that is not in the cache is refused with where tern looked and how to get it.
The caches are fake trees built by tests/gen/hf_layouts.py."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "gen"))
from hf_layouts import make_hf_cache  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "models" / "qwen3_tied"
DEMO = ROOT / "models" / "tern-demo-code-17m"


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "HF_HOME")}
    env.update({k: str(v) for k, v in kw.items()})
    return env


def inspect(tern_bin, model, env, cwd):
    return subprocess.run([tern_bin, "inspect", "--model", model], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("where", ["HF_HUB_CACHE", "HF_HOME", "HOME"])
def test_repo_id_resolves_in_each_cache_location(tern_bin, tmp_path, where):
    if where == "HF_HUB_CACHE":
        hub, env = tmp_path / "hub-cache", env_with(HF_HUB_CACHE=tmp_path / "hub-cache", HOME=tmp_path / "nohome")
    elif where == "HF_HOME":
        hub, env = tmp_path / "hfhome" / "hub", env_with(HF_HOME=tmp_path / "hfhome", HOME=tmp_path / "nohome")
    else:
        hub, env = tmp_path / "home" / ".cache" / "huggingface" / "hub", env_with(HOME=tmp_path / "home")
    make_hf_cache(FIXTURE, hub, repo="Org-1/tiny.model_x")
    r = inspect(tern_bin, "Org-1/tiny.model_x", env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "qwen3" in r.stdout and "tied embedding yes" in r.stdout


def test_hf_hub_cache_wins_over_hf_home(tern_bin, tmp_path):
    make_hf_cache(FIXTURE, tmp_path / "hubcache", repo="org/a")
    env = env_with(HF_HUB_CACHE=tmp_path / "hubcache", HF_HOME=tmp_path / "empty")
    assert inspect(tern_bin, "org/a", env, tmp_path).returncode == 0
    env = env_with(HF_HUB_CACHE=tmp_path / "empty", HF_HOME=tmp_path)  # tmp_path/hub does not exist
    r = inspect(tern_bin, "org/a", env, tmp_path)
    assert r.returncode == 1 and str(tmp_path / "empty" / "models--org--a") in r.stderr


def test_missing_model_says_where_it_looked_and_how_to_get_it(tern_bin, tmp_path):
    env = env_with(HF_HUB_CACHE=tmp_path / "hub")
    for cmd in (["inspect"], ["generate", "--prompt", "x", "--max-tokens", "1"], ["tokenize", "--text", "x"]):
        r = subprocess.run([tern_bin, *cmd, "--model", "Qwen/Qwen3-0.6B"], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
        assert r.returncode == 1, (cmd, r.stderr)
        assert str(tmp_path / "hub" / "models--Qwen--Qwen3-0.6B") in r.stderr
        assert "huggingface-cli download Qwen/Qwen3-0.6B" in r.stderr
        assert "not a directory" in r.stderr


def test_revisions_by_ref_and_by_commit_hash(tern_bin, tmp_path):
    hub = tmp_path / "hub"
    snap_tied = pathlib.Path(make_hf_cache(FIXTURE, hub, repo="org/m"))
    # A second snapshot of another checkpoint, reachable through refs/v2 and by its hash.
    other = ROOT / "tests" / "fixtures" / "models" / "qwen2"
    snap_q2 = pathlib.Path(make_hf_cache(other, tmp_path / "tmpcache", repo="org/m"))
    entry = hub / "models--org--m"
    shutil.copytree(snap_q2.parent.parent / "blobs", entry / "blobs", dirs_exist_ok=True)
    shutil.copytree(snap_q2, entry / "snapshots" / snap_q2.name, symlinks=True)
    (entry / "refs" / "v2").write_text(snap_q2.name)
    (entry / "refs" / "pr").mkdir()
    (entry / "refs" / "pr" / "1").write_text(snap_q2.name)
    env = env_with(HF_HUB_CACHE=hub)
    for spec, kind in [("org/m", "qwen3"), ("org/m@main", "qwen3"), ("org/m@v2", "qwen2"),
                       ("org/m@pr/1", "qwen2"), ("org/m@" + snap_q2.name, "qwen2"),
                       ("org/m@" + snap_tied.name, "qwen3")]:
        r = inspect(tern_bin, spec, env, tmp_path)
        assert r.returncode == 0, (spec, r.stderr)
        assert f"architecture   {kind}\n" in r.stdout, (spec, r.stdout)
    r = inspect(tern_bin, "org/m@v3", env, tmp_path)
    assert r.returncode == 1 and 'revision "v3"' in r.stderr
    r = inspect(tern_bin, "org/m@../../x", env, tmp_path)
    assert r.returncode == 1 and "invalid revision" in r.stderr
    (entry / "refs" / "v4").write_text("0" * 40)
    r = inspect(tern_bin, "org/m@v4", env, tmp_path)
    assert r.returncode == 1 and "refs/v4 names snapshot " + "0" * 40 in r.stderr


def test_local_directory_wins_over_a_repo_id(tern_bin, tmp_path):
    """A relative path that exists is a directory, whatever the cache holds."""
    (tmp_path / "org").mkdir()
    shutil.copytree(FIXTURE, tmp_path / "org" / "m")
    make_hf_cache(ROOT / "tests" / "fixtures" / "models" / "qwen2", tmp_path / "hub", repo="org/m")
    r = inspect(tern_bin, "org/m", env_with(HF_HUB_CACHE=tmp_path / "hub"), tmp_path)
    assert r.returncode == 0 and "tied embedding yes" in r.stdout


def test_generate_and_serve_take_a_repo_id(tern_bin, tmp_path):
    make_hf_cache(DEMO, tmp_path / "hub", repo="tern/demo-code-17m")
    env = env_with(HF_HUB_CACHE=tmp_path / "hub")
    args = ["--prompt", "def add(a, b):", "--max-tokens", "8", "--temperature", "0"]
    by_id = subprocess.run([tern_bin, "generate", "--model", "tern/demo-code-17m", *args],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    by_dir = subprocess.run([tern_bin, "generate", "--model", str(DEMO), *args], capture_output=True, text=True)
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout == by_dir.stdout and by_id.stdout.strip()
    tok = subprocess.run([tern_bin, "tokenize", "--model", "tern/demo-code-17m", "--text", "def f():"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    tok_dir = subprocess.run([tern_bin, "tokenize", "--model", str(DEMO), "--text", "def f():"],
                             capture_output=True, text=True)
    assert tok.returncode == 0 and tok.stdout == tok_dir.stdout
    import server_harness
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        srv = server_harness.Server(model="tern/demo-code-17m", env=env)
    finally:
        os.chdir(old)
    try:
        status, body = srv.get("/v1/models")
        assert status == 200 and b'"tern/demo-code-17m"' in body
    finally:
        srv.stop()


def test_bad_repo_ids_are_refused_clearly(tern_bin, tmp_path):
    env = env_with(HF_HUB_CACHE=tmp_path)
    for spec in ["a/b/c", "org/", "/nope/x", "org/na me", "org/m@"]:
        r = inspect(tern_bin, spec, env, tmp_path)
        assert r.returncode == 1, spec
        assert "not a directory" in r.stderr, (spec, r.stderr)
