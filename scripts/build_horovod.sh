#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyTorch CPU + Gloo, no MPI) from its PyPI sdist into a cached virtual environment,
# for the end-to-end test that runs a real `horovodrun` elastic job against kubesim.
#
# 0.28.1 compiles its PyTorch extension as C++14, but PyTorch >= 2.1 headers require C++17, so the release does
# not build against any torch pip can get here. scripts/horovod/torch-cxx17.patch (our own CMake change) builds
# the extension and the Gloo copy it links as C++17 with PyTorch's C++11 ABI setting.
#
# Usage: scripts/build_horovod.sh [CACHE_DIR]    CACHE_DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/mpi-operator
# Prints the venv directory on stdout; everything else goes to stderr. The venv is keyed on this script and the
# patch, so a second run with the same inputs only prints the path. About 2.5 minutes from scratch on 2 cores.
# Exits 3 when PyPI cannot be reached (the caller may skip), any other non-zero on a real build failure.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VERSION=0.28.1
SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
TORCH=2.13.0
PATCH="$HERE/horovod/torch-cxx17.patch"
PYTHON=${PYTHON:-python3}
CACHE=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/mpi-operator}
KEY=$(cat "$0" "$PATCH" | sha256sum | cut -c1-12)
VENV="$CACHE/horovod-$VERSION-torch-$TORCH-$KEY"

mkdir -p "$CACHE"
# One builder at a time (parallel test sessions share the cache); the others wait and reuse its result.
exec 9>"$CACHE/.horovod-build.lock"
flock 9
if [ -f "$VENV/.complete" ]; then
  echo "$VENV"
  exit 0
fi
rm -rf "$VENV"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip, quietly, without this machine's "Location ... is ignored" noise; its exit status is kept.
pip_q() {
  local rc=0
  "$@" -q --disable-pip-version-check >"$work/pip.log" 2>&1 || rc=$?
  grep -v "is ignored" "$work/pip.log" >&2 || true
  return "$rc"
}

if ! "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" "horovod==$VERSION" >&2; then
  echo "build_horovod: cannot download horovod==$VERSION from PyPI" >&2
  exit 3
fi
echo "$SHA256  $work/horovod-$VERSION.tar.gz" | sha256sum -c --quiet - >&2
tar xzf "$work/horovod-$VERSION.tar.gz" -C "$work"
patch -s -d "$work/horovod-$VERSION" -p1 < "$PATCH"

"$PYTHON" -m venv "$VENV"
pip_q "$VENV/bin/pip" install --upgrade pip setuptools wheel
# torch==2.13.0 is the CPU wheel this machine keeps on disk; any other torch is a multi-GB CUDA download.
pip_q "$VENV/bin/pip" install "torch==$TORCH" numpy cloudpickle psutil pyyaml packaging cffi
# --no-build-isolation: Horovod's CMake imports the torch installed above to find headers, ABI and version.
pip_q env HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_PYTORCH=1 MAKEFLAGS=-j"$(nproc)" "$VENV/bin/pip" install --no-build-isolation --no-cache-dir "$work/horovod-$VERSION"
"$VENV/bin/horovodrun" --check-build >&2
"$VENV/bin/python" -c "import horovod.torch as hvd; assert hvd.gloo_built(), 'Horovod built without Gloo'"
touch "$VENV/.complete"
echo "$VENV"
