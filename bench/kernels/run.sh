#!/bin/sh
# Builds and runs the matmul kernel benchmark against build/libtern.a.
set -e
cd "$(dirname "$0")/../.."
[ -f build/libtern.a ] || make -j2 build/libtern.a
cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -o build/bench_matmul bench/kernels/bench_matmul.c \
    build/libtern.a $(make -s link-flags)
exec build/bench_matmul "$@"
