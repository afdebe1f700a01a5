#!/usr/bin/env bash
# Run the benchmarks (all, or those whose file name contains $1) and write docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${ZKCOORD_VENV:-.venv}
for f in benchmarks/bench_*.py; do
  case "$f" in *"${1:-}"*) echo "== $f"; "$VENV/bin/python" -m "benchmarks.$(basename "$f" .py)";; esac
done
