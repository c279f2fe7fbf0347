#!/usr/bin/env bash
# Packs what a GPU machine needs to run the CUDA op harness, the device
# benchmark, the forward's GPU test (test_forward_cuda) and tern into DEST (default .dev/cuda): the binaries (stripped,
# xz-compressed) and the Debian shared libraries tern links, which such a
# machine may lack. There: tar -xJf DEST/bin.tar.xz -C DEST, then run
# DEST/bin/ops_test, DEST/bin/bench_cuda, or LD_LIBRARY_PATH=DEST/lib DEST/bin/tern
# (or DEST/bin/test_forward_cuda, from the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.dev/cuda}
b=${B:-build}
for f in "$b/ops_test" "$b/tern" "$b/tests/test_forward_cuda"; do [ -x "$f" ] || { echo "missing $f (build with nvcc present)"; exit 1; }; done
tmp=$(mktemp -d)
mkdir -p "$tmp/bin" "$tmp/lib" "$dest"
cp "$b/ops_test" "$b/tern" "$b/tests/test_forward_cuda" "$tmp/bin/"; [ -x "$b/bench_cuda" ] && [ -n "${WITH_BENCH:-}" ] && cp "$b/bench_cuda" "$tmp/bin/"
strip "$tmp/bin/"*
# every library tern resolves outside glibc, the compiler runtime and CUDA
ldd "$b/tern" | awk '/=> \//{print $3}' | grep -Ev '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so|/cuda' \
  | while read -r l; do cp -L "$l" "$tmp/lib/"; done
# the kernel tracer (bench/ktrace/ktrace.c) and the CUPTI it links, where the toolkit has CUPTI
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$cuda/include/cupti.h" ] && [ -e "$cuda/lib/libcupti.so" ]; then
  cc -O2 -shared -fPIC -I"$cuda/include" bench/ktrace/ktrace.c -L"$cuda/lib" -lcupti -o "$tmp/lib/libktrace.so"
  cp -L "$cuda/lib/libcupti.so" "$tmp/lib/$(readlink "$cuda/lib/libcupti.so" || echo libcupti.so)"
fi
# a dictionary that spans the binaries: their CUDA code is the same bytes
XZ_OPT=-9e tar -cJf "$dest/bin.tar.xz" -C "$tmp" bin lib
rm -rf "$tmp"
ls -la "$dest/bin.tar.xz"
