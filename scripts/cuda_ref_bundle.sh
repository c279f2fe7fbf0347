#!/usr/bin/env bash
# Builds tern at git revision REV (default main) in a scratch worktree and
# packs its stripped binary as DEST/ref.tar.xz (default .dev/cuda), for
# the "ref" entries of bench/cuda/device_run.sh's benchab and batchab: the
# same benchmark by two builds in one GPU call. Needs nvcc (the CUDA
# objects are part of tern).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
dest=${2:-.dev/cuda}
wt=$(mktemp -d)
trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT
git worktree add --detach "$wt" "$rev" >/dev/null
make -C "$wt" -j"$(nproc)" build/tern >/dev/null
mkdir -p "$wt/pack/ref" "$dest"
strip -o "$wt/pack/ref/tern" "$wt/build/tern"
git rev-parse "$rev" >"$wt/pack/ref/REV"
XZ_OPT=-9e tar -cJf "$dest/ref.tar.xz" -C "$wt/pack" ref
ls -la "$dest/ref.tar.xz"
