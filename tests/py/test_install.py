"""make install: libtern (static and shared), its headers and tern.pc; a small
C program built against the installed copy with pkg-config runs two requests
through one engine and gets the same tokens as `tern generate`."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tern-demo-code-17m"
TERN = pathlib.Path(os.environ.get("TERN_BIN", ROOT / "build" / "tern"))
PROMPTS = ["def add(a, b):", "class Queue:"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is missing (scripts/setup.sh installs it)")
    p = tmp_path_factory.mktemp("prefix")
    build = "build-san" if "build-san" in str(TERN) else "build"
    extra = ["SAN=1"] if build == "build-san" else []
    subprocess.run(["make", "-s", "install", f"PREFIX={p}", *extra], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return p


def expected(prompt):
    out = subprocess.run([str(TERN), "generate", "--model", str(MODEL), "--prompt", prompt, "--max-tokens", "12",
                          "--ids-out"], capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.strip().split(",") if x]


def pkg(prefix, *args):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    return subprocess.run(["pkg-config", *args, "tern"], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.parametrize("kind", ["shared", "static"])
def test_program_against_installed_lib(prefix, tmp_path, kind):
    for h in ("engine.h", "model.h", "tokenizer.h", "generate.h", "sampler.h", "status.h", "system.h", "server.h"):
        assert (prefix / "include" / "tern" / h).exists()
    assert (prefix / "lib" / "libtern.a").exists() and (prefix / "lib" / "libtern.so").exists()
    exe = tmp_path / "engine_demo"
    src = ROOT / "tests" / "install" / "engine_demo.c"
    cflags = pkg(prefix, "--cflags")
    san = ["-fsanitize=address,undefined"] if "build-san" in str(TERN) else []
    if kind == "shared":
        libs = pkg(prefix, "--libs") + [f"-Wl,-rpath,{prefix / 'lib'}"]
    else:
        libs = [str(prefix / "lib" / "libtern.a")] + pkg(prefix, "--libs-only-other", "--static") + \
            [x for x in pkg(prefix, "--static", "--libs") if x not in ("-ltern",) and x != f"-L{prefix / 'lib'}"]
    # The program sees only the installed headers: no -I into the source tree.
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, *cflags, "-o", str(exe), str(src), *libs, "-pthread"],
                   check=True)
    if kind == "shared":
        ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
        assert str(prefix / "lib" / "libtern.so") in ldd
    out = subprocess.run([str(exe), str(MODEL), PROMPTS[0], PROMPTS[1], "12"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    got = {line[0]: [int(x) for x in line[2:].split()] for line in out}
    assert got["A"] == expected(PROMPTS[0])
    assert got["B"] == expected(PROMPTS[1])
