#!/usr/bin/env bash
# Installs what tern needs, builds it, and generates text with the built-in
# demo model (a small Qwen3-architecture model trained on Python code).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
prompt=${1:-"def fibonacci(n):"}
exec build/tern generate --model models/tern-demo-code-17m --prompt "$prompt" --max-tokens 120 --temperature 0.7 --seed 1
