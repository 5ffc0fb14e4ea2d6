"""Where the Horovod tests keep what they fetch and build (a helper module, not a test module)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> str:
    """$MPI_OPERATOR_HOROVOD_CACHE, else the XDG cache's `mpi-operator` folder (the scripts'
    default)."""
    return os.environ.get("MPI_OPERATOR_HOROVOD_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mpi-operator"
    )
