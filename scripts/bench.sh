#!/usr/bin/env bash
# Run the benchmarks (all, or those whose file name contains $1) and write docs/benchmarks.md.
# Each benchmark starts once the 1-minute load average is under ZKCOORD_BENCH_QUIET (default 1.0), waiting at
# most ZKCOORD_BENCH_WAIT seconds (default 150; the previous benchmark's own load takes about a minute to
# decay), so a figure is not taken while the last one's processes still weigh on it; the load it started at is
# stamped in its section.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${ZKCOORD_VENV:-.venv}
QUIET=${ZKCOORD_BENCH_QUIET:-1.0}
WAIT=${ZKCOORD_BENCH_WAIT:-150}
load1() { cut -d' ' -f1 /proc/loadavg; }
for f in benchmarks/bench_*.py; do
  case "$f" in *"${1:-}"*)
    waited=0
    while awk -v l="$(load1)" -v q="$QUIET" 'BEGIN { exit !(l >= q) }' && [ "$waited" -lt "$WAIT" ]; do
      sleep 5; waited=$((waited + 5))
    done
    echo "== $f (load $(load1), waited ${waited}s for load < $QUIET)"
    ZKCOORD_BENCH_LOAD=$(load1) "$VENV/bin/python" -m "benchmarks.$(basename "$f" .py)";;
  esac
done
