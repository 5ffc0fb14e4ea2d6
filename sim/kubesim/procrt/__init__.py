"""The process runtime of kubesim's kubelet: pods whose containers are real programs.

Chosen per simulation (`SimSettings.runtime == "process"`, `mpi-operator sim --runtime process`);
the timer model (`controllers/podstate.py`) stays the default. docs/kubesim-process-runtime.md is
the design: the sandbox and bridge namespaces, the per-container shim, volumes on disk, DNS, probes,
logs, cleanup. This package module only says whether the runtime can run here, and which host paths
its containers cannot see, without loading it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kubesim.procrt.shim import CONTAINER_OWN_DIRS


def missing_requirements() -> str | None:
    """Why the process runtime cannot run on this machine, or None."""
    if os.geteuid() != 0:
        return "the process runtime needs root (Linux namespaces, mounts, veth links)"
    for tool in ("ip", "nsenter", "setpriv"):
        if shutil.which(tool) is None:
            return f"the process runtime needs `{tool}` (Debian packages iproute2 / util-linux)"
    return None


def hidden_from_containers(path: Path) -> str | None:
    """Why a host path cannot be seen inside the runtime's containers, or None when it can: each
    container mounts its own `/tmp`, `/dev/shm` and `/proc` over the host's."""
    real = Path(os.path.realpath(path))
    for own in CONTAINER_OWN_DIRS:
        if real == Path(own) or real.is_relative_to(own):
            return (
                f"{path} is under {own}, which every container of the process runtime mounts afresh"
            )
    return None
