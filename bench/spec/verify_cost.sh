#!/bin/sh
# Builds and runs bench/spec/verify_cost.c against build/libtern.a.
#   bench/spec/verify_cost.sh --model DIR [--threads 2] [--prompt 512] [--k 2,3,5,9] [--reps 20]
set -e
cd "$(dirname "$0")/../.."
[ -f build/libtern.a ] || make -j2 build/libtern.a
cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -o build/verify_cost bench/spec/verify_cost.c \
    build/libtern.a $(make -s link-flags)
exec build/verify_cost "$@"
