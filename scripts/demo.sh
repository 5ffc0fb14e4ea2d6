#!/usr/bin/env bash
# Sets up the project and runs the demo on the embedded simulated cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
exec .venv/bin/mpi-operator demo "$@"
