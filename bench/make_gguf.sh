#!/usr/bin/env bash
# Converts a Hugging Face model directory to an F16 GGUF with llama.cpp's own converter, for the
# llama.cpp baseline of the CPU benchmark.
#
#   bench/make_gguf.sh [MODEL_DIR] [OUT_GGUF]
#     MODEL_DIR  default /work/bench-models/qwen3-0.46b (made by tests/gen/gen_bench_model.py)
#     OUT_GGUF   default MODEL_DIR with "-f16.gguf" appended (next to the directory, not inside)
#
# The converter (convert_hf_to_gguf.py + gguf-py) is the one vendored in the llama-cpp-python
# source distribution from PyPI, in the same place bench/setup_llamacpp.sh leaves it
# ($LLAMACPP_DIR/llama.cpp). When it is missing, only the source tree is fetched and extracted
# here (no build). Python needs torch, numpy, safetensors, transformers; the model directory
# needs tokenizer.json + tokenizer_config.json (gen_bench_model.py copies the Qwen3 ones).
# Nothing is written inside the repository. About 30 s and 0.9 GB of disk for the 0.46B model.
#
# GGUF_PRE=NAME: name the BPE pre-tokenizer (tokenizer.ggml.pre) instead of letting the
# converter recognise it by hashing the tokenizer's output on a test string. The trained demo
# models' tokenizer uses Qwen2's pre-tokenizer regex but its own vocabulary, which the
# converter's table does not list; for them GGUF_PRE=qwen2 is the right name.
#
# Full sequence for the benchmark model:
#   python3 tests/gen/gen_bench_model.py /work/bench-models/qwen3-0.46b
#   bench/make_gguf.sh /work/bench-models/qwen3-0.46b   # -> /work/bench-models/qwen3-0.46b-f16.gguf
set -euo pipefail

MODEL_DIR="${1:-/work/bench-models/qwen3-0.46b}"
MODEL_DIR="${MODEL_DIR%/}"
OUT="${2:-$MODEL_DIR-f16.gguf}"
LLAMACPP_DIR="${LLAMACPP_DIR:-$HOME/.cache/tern-bench/llama.cpp}"
LLAMACPP_PY_VERSION="${LLAMACPP_PY_VERSION:-0.3.36}"

[ -f "$MODEL_DIR/config.json" ] || { echo "make_gguf: $MODEL_DIR/config.json not found" >&2; exit 1; }
[ -f "$MODEL_DIR/tokenizer.json" ] || { echo "make_gguf: $MODEL_DIR/tokenizer.json not found (the converter needs the tokenizer)" >&2; exit 1; }

conv="$LLAMACPP_DIR/llama.cpp/convert_hf_to_gguf.py"
if [ ! -f "$conv" ]; then
    echo "make_gguf: fetching llama-cpp-python==$LLAMACPP_PY_VERSION source distribution for the converter"
    mkdir -p "$LLAMACPP_DIR/sdist"
    sdist="$LLAMACPP_DIR/sdist/llama_cpp_python-$LLAMACPP_PY_VERSION.tar.gz"
    [ -f "$sdist" ] || python3 -m pip download --no-deps --no-binary :all: -d "$LLAMACPP_DIR/sdist" \
        "llama-cpp-python==$LLAMACPP_PY_VERSION"
    top=$(basename "$sdist" .tar.gz)
    rm -rf "$LLAMACPP_DIR/extract" && mkdir -p "$LLAMACPP_DIR/extract"
    tar xzf "$sdist" -C "$LLAMACPP_DIR/extract" "$top/vendor/llama.cpp"
    mv "$LLAMACPP_DIR/extract/$top/vendor/llama.cpp" "$LLAMACPP_DIR/llama.cpp"
    rm -rf "$LLAMACPP_DIR/extract"
fi

if [ -n "${GGUF_PRE:-}" ]; then
    # The converter run as a module with its pre-tokenizer lookup answered by GGUF_PRE.
    PYTHONPATH="$LLAMACPP_DIR/llama.cpp:$LLAMACPP_DIR/llama.cpp/gguf-py${PYTHONPATH:+:$PYTHONPATH}" \
        python3 - "$conv" "$MODEL_DIR" --outtype f16 --outfile "$OUT" <<'PY'
import os, runpy, sys
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: os.environ["GGUF_PRE"]
conv = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(conv, run_name="__main__")
PY
else
    PYTHONPATH="$LLAMACPP_DIR/llama.cpp/gguf-py${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$conv" "$MODEL_DIR" --outtype f16 --outfile "$OUT"
fi
ls -l "$OUT"
