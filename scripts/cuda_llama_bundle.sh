#!/usr/bin/env bash
# Packs llama.cpp's CUDA llama-bench (built by LLAMACPP_CUDA=1 bench/setup_llamacpp.sh) and
# its gguf-py into DEST (default .dev/cuda) for bench/cuda/device_run.sh's gguf and llamabench
# phases: DEST/llama.tar.xz (llama/llama-bench, stripped, with the libgomp it links; cuBLAS,
# cudart and NCCL are taken from the GPU machine) and DEST/gguf-py.
#
# llama.tar.xz is about 40 MB. With tern's bundle beside it, the copy to the GPU machine then
# exceeds its 64 MiB unless the tracked models/, tests/fixtures and tests/goldens stay behind.
# Those are needed only by the fwd, parity and batch phases. Move them aside for such a call
# and back right after; a commit made while they are away records them as deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.dev/cuda}
L=${LLAMACPP_DIR:-$HOME/.cache/tern-bench/llama.cpp}
bin=$L/build-cuda/bin/llama-bench
[ -x "$bin" ] || { echo "missing $bin (run LLAMACPP_CUDA=1 bench/setup_llamacpp.sh)"; exit 1; }
[ -d "$L/llama.cpp/gguf-py" ] || { echo "missing $L/llama.cpp/gguf-py"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/llama" "$dest"
strip -o "$tmp/llama/llama-bench" "$bin"
ldd "$bin" | awk '/libgomp/{print $3}' | while read -r l; do cp -L "$l" "$tmp/llama/"; done
XZ_OPT=-9 tar -cJf "$dest/llama.tar.xz" -C "$tmp" llama
rm -rf "$dest/gguf-py"
cp -r "$L/llama.cpp/gguf-py" "$dest/gguf-py"
rm -rf "$dest/gguf-py/tests" "$dest/gguf-py/examples"
ls -la "$dest/llama.tar.xz"
