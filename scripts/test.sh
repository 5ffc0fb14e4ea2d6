#!/usr/bin/env bash
# The whole test suite: lint, types, import layering, tests. Sets everything up first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Real MPIs and stand-in images for kubesim's process runtime; exit 3: registries unreachable.
mpi_rc=0
scripts/setup_mpi.sh || mpi_rc=$?
if [ "$mpi_rc" = 3 ]; then
  echo "test: MPI software not installed (package registries unreachable); its tests will skip"
elif [ "$mpi_rc" != 0 ]; then
  echo "test: scripts/setup_mpi.sh failed (exit $mpi_rc)" >&2
  exit "$mpi_rc"
fi

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy (strict: mpi_operator, mpi_discovery, kubesim)"
.venv/bin/mypy
echo "== import layering"
.venv/bin/lint-imports
echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider "$@"
