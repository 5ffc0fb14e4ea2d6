#!/usr/bin/env bash
# Fetches the Horovod 0.28.1 sdist from PyPI (pip, checked against its published sha256) and extracts
# only its pure-Python modules (horovod/__init__.py, horovod/runner/, horovod/common/) into DEST, for tests
# that drive Horovod's own discovery and blacklist code. Nothing of Horovod is vendored in the repository.
#
# Usage: scripts/fetch_horovod.sh [DEST]     DEST defaults to ${XDG_CACHE_HOME:-~/.cache}/mpi-operator
# Prints the source root (DEST/horovod-0.28.1) on success; a second run only prints it. Exits non-zero
# when PyPI cannot be reached or the download does not match.
set -euo pipefail
VERSION=0.28.1
SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
DEST=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}
ROOT="$DEST/horovod-$VERSION"
if [ -f "$ROOT/horovod/runner/elastic/discovery.py" ]; then
  echo "$ROOT"
  exit 0
fi
PYTHON=${PYTHON:-python3}
mkdir -p "$DEST"
work=$(mktemp -d "$DEST/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$work" "horovod==$VERSION" >&2
sdist="$work/horovod-$VERSION.tar.gz"
echo "$SHA256  $sdist" | sha256sum -c --quiet - >&2
tar xzf "$sdist" -C "$work" "horovod-$VERSION/horovod/__init__.py" "horovod-$VERSION/horovod/runner" \
  "horovod-$VERSION/horovod/common"
# rename is atomic: a concurrent or interrupted run never leaves a half-extracted tree behind
mv -T "$work/horovod-$VERSION" "$ROOT" 2>/dev/null || test -f "$ROOT/horovod/runner/elastic/discovery.py"
echo "$ROOT"
