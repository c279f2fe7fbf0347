"""The layering ARCHITECTURE.md asks for, checked on the sources: each layer
includes only headers of its own layer or below, and the Anthropic shaping and
the reply shaping call each other in one direction only."""
import re

import pytest

from conftest import ROOT

SRC = ROOT / "src"
# Which project headers each layer may include (besides the public tern/ headers).
# The engine-side layers (backend, kv, model, engine) are not listed here.
ALLOWED = {
    "core": {"core"},
    "io": {"core", "io"},
    "text": {"core", "text"},
    "server": {"core", "io", "text", "engine", "server"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_includes_only_what_is_below(layer):
    bad = []
    for f in sorted((SRC / layer).rglob("*.[ch]")):
        for inc in INCLUDE.findall(f.read_text()):
            if inc != "tern" and inc not in ALLOWED[layer]:
                bad.append(f"{f.relative_to(ROOT)} includes {inc}/")
    assert not bad, "\n".join(bad)


def defined_functions(path):
    """Non-static functions defined at file scope."""
    text = path.read_text()
    return set(re.findall(r'^(?!static)[a-z][\w \*]*?\b(srv_\w+)\(', text, re.M))


def test_anthropic_does_not_call_back_into_reply():
    reply_fns = defined_functions(SRC / "server" / "reply.c")
    anth_fns = defined_functions(SRC / "server" / "anthropic.c")
    assert reply_fns and anth_fns
    anth = (SRC / "server" / "anthropic.c").read_text()
    reply = (SRC / "server" / "reply.c").read_text()
    assert any(re.search(r'\b%s\(' % f, reply) for f in anth_fns)  # reply.c -> anthropic.c
    back = [f for f in reply_fns if re.search(r'\b%s\(' % f, anth)]
    assert not back, f"anthropic.c calls reply.c's {back}"


def test_text_parsers_live_in_text():
    for name in ("stop", "think", "toolcall"):
        assert (SRC / "text" / f"{name}.c").exists() and not (SRC / "server" / f"{name}.c").exists()
