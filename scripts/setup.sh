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
# Reinstall only when the dependency list changed since the last install.
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
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
