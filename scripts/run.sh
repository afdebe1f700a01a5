#!/usr/bin/env bash
# Set up (first time only) and run the zkcoord command: `bash scripts/run.sh demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh run
exec "${ZKCOORD_VENV:-.venv}/bin/zkcoord" "$@"
