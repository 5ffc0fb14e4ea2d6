#!/usr/bin/env bash
# Creates .venv and installs the project with its development tools; installs kubectl if missing.
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
# Reinstall only when a dependency list (the operator's or kubesim's) changed since the last install.
stamp=.venv/.installed-$(cat pyproject.toml sim/pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # kubesim is not on the package index: installed from sim/ first, it satisfies the `sim` extra.
  .venv/bin/python -m pip install -q -e ./sim
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi

if ! command -v kubectl >/dev/null 2>&1; then
  echo "setup: kubectl not found, installing it from Debian packages" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq kubectl >/dev/null 2>&1 || $SUDO apt-get install -y -qq kubernetes-client
fi
