#!/usr/bin/env bash
# Builds the llama.cpp CPU baseline used by bench/cpu_vs_llamacpp.sh, from PyPI material only.
#
# The llama-cpp-python source distribution carries the full llama.cpp tree under vendor/llama.cpp
# (CMake project, llama-bench, convert_hf_to_gguf.py, gguf-py). This script downloads that sdist
# with pip, builds llama.cpp's own CMake project (Release, CPU only, GGML_NATIVE=ON) and leaves:
#
#   $LLAMACPP_DIR/build/bin/llama-bench     the benchmark tool
#   $LLAMACPP_DIR/llama.cpp/                the vendored source tree (convert_hf_to_gguf.py, gguf-py/)
#
# Nothing is written inside the repository.
#
# Environment:
#   LLAMACPP_DIR         output directory (default: $HOME/.cache/tern-bench/llama.cpp)
#   LLAMACPP_PY_VERSION  llama-cpp-python version to fetch (default: 0.3.36; "latest" = newest)
#   JOBS                 parallel build jobs (default: 2)
#   LLAMACPP_TARGETS     CMake targets to build (default: llama-bench; e.g. add llama-server llama-quantize
#                        llama-batched-bench)
#   LLAMACPP_CUDA        1: build the CUDA baseline instead (sm_90, into $LLAMACPP_DIR/build-cuda; needs nvcc;
#                        about 70 minutes on 2 cores; llama-bench is then 69 MB and links cuBLAS, cudart and
#                        NCCL dynamically)
set -euo pipefail

LLAMACPP_DIR="${LLAMACPP_DIR:-$HOME/.cache/tern-bench/llama.cpp}"
LLAMACPP_PY_VERSION="${LLAMACPP_PY_VERSION:-0.3.36}"
JOBS="${JOBS:-2}"
LLAMACPP_TARGETS="${LLAMACPP_TARGETS:-llama-bench}"

for tool in python3 cmake tar; do
    command -v "$tool" >/dev/null || { echo "setup_llamacpp: '$tool' not found" >&2; exit 1; }
done

mkdir -p "$LLAMACPP_DIR/sdist"
cd "$LLAMACPP_DIR"

# 1. Source distribution from PyPI (no binaries, no dependencies).
spec="llama-cpp-python"
[ "$LLAMACPP_PY_VERSION" != "latest" ] && spec="llama-cpp-python==$LLAMACPP_PY_VERSION"
# shellcheck disable=SC2012
sdist=$(ls sdist/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)
if [ "$LLAMACPP_PY_VERSION" != "latest" ]; then
    sdist=$(ls "sdist/llama_cpp_python-$LLAMACPP_PY_VERSION.tar.gz" 2>/dev/null || true)
fi
if [ -z "$sdist" ]; then
    echo "setup_llamacpp: downloading $spec source distribution"
    python3 -m pip download --no-deps --no-binary :all: -d sdist "$spec"
    # shellcheck disable=SC2012
    sdist=$(ls sdist/llama_cpp_python-*.tar.gz | sort -V | tail -n 1)
fi
echo "setup_llamacpp: using $sdist"

# 2. Extract only the vendored llama.cpp tree.
if [ ! -f llama.cpp/CMakeLists.txt ]; then
    rm -rf llama.cpp extract
    mkdir -p extract
    top=$(basename "$sdist" .tar.gz)
    tar xzf "$sdist" -C extract "$top/vendor/llama.cpp"
    mv "extract/$top/vendor/llama.cpp" llama.cpp
    rm -rf extract
    basename "$sdist" > llama.cpp/.tern-bench-sdist
fi

# 3a. The CUDA baseline (LLAMACPP_CUDA=1): sm_90 kernels, static ggml, no CPU-native flags.
if [ "${LLAMACPP_CUDA:-0}" = 1 ]; then
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    [ -x "$nvcc" ] || { echo "setup_llamacpp: LLAMACPP_CUDA=1 needs nvcc" >&2; exit 1; }
    cmake -S llama.cpp -B build-cuda \
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
    # shellcheck disable=SC2086
    cmake --build build-cuda --config Release -j "$JOBS" --target $LLAMACPP_TARGETS
    echo "setup_llamacpp: built:"
    ls -l build-cuda/bin/
    exit 0
fi

# 3. Configure and build: Release, CPU only, native ISA (AVX-512 / avx512_bf16 where present).
# llama-server (the HTTP baseline of the batching benchmark) is configured only when asked for.
# The examples (llama-speculative, llama-lookup: the speculative baselines) likewise.
server=OFF examples=OFF
case " $LLAMACPP_TARGETS " in *" llama-server "*) server=ON ;; esac
case " $LLAMACPP_TARGETS " in *" llama-speculative"*|*" llama-lookup"*) examples=ON ;; esac
cmake -S llama.cpp -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENCL=OFF -DGGML_HIP=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=$examples -DLLAMA_BUILD_SERVER=$server \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
# shellcheck disable=SC2086
cmake --build build --config Release -j "$JOBS" --target $LLAMACPP_TARGETS

echo "setup_llamacpp: built:"
ls -l build/bin/
echo "setup_llamacpp: converter: $LLAMACPP_DIR/llama.cpp/convert_hf_to_gguf.py"
echo "  (python packages: torch, numpy, safetensors, transformers; gguf comes from PYTHONPATH=$LLAMACPP_DIR/llama.cpp/gguf-py)"
