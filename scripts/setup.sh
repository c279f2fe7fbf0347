#!/usr/bin/env bash
# Installs what tern needs on Debian 12 (build tools, the C libraries it links,
# and the Python packages its tests use), then builds it. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
# tmux drives `tern chat` in its tests, chromium renders the web chat page,
# clang (with libclang-rt for libFuzzer) builds the fuzz targets.
pkgs="build-essential pkg-config libjansson-dev libmicrohttpd-dev libpcre2-dev libutf8proc-dev tmux chromium clang libclang-rt-14-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi
if [ "${1:-}" = "--test" ]; then
  python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt
fi
make -j"$(nproc)"
