#!/usr/bin/env bash
# Set up (first time only), then lint, type-check and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
VENV=${ZKCOORD_VENV:-.venv}
echo "== ruff"; "$VENV/bin/ruff" check zkcoord migration tests benchmarks
"$VENV/bin/ruff" format --check -q zkcoord migration tests benchmarks
echo "== mypy"; "$VENV/bin/mypy" --no-error-summary
echo "== import contract"; "$VENV/bin/lint-imports" --no-cache | sed -n '/^Contracts/,$p'  # fails the run if broken
echo "== pytest"; exec "$VENV/bin/pytest" "$@"
