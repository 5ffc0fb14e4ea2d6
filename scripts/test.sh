#!/usr/bin/env bash
# The whole test suite: lint, types, import layering, tests. Sets everything up first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy (strict: mpi_operator, mpi_discovery, kubesim)"
.venv/bin/mypy
echo "== import layering"
.venv/bin/lint-imports
echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider "$@"
