"""A stand-in for `examples/elastic/Dockerfile`'s image, for kubesim's process runtime.

From the Dockerfile's facts: user `mpiuser` (uid/gid 1000, home /home/mpiuser, bash); sshd on 2222
with host keys that user owns (`/etc/ssh/host-keys`), `StrictModes yes`, `AllowUsers mpiuser`; the
ssh client on 2222 without host-key checks and with `ConnectionAttempts 10`; the training scripts
under /examples/elastic; sshd (`/usr/sbin/sshd -De`) as the default command. Horovod is the venv the
tests build on this machine, first on PATH; the image makes `/root` traversable (mode 0755 in its
own layer) because that venv and the Python it links to live under /root here, while the image's
user is uid 1000.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubesim.images import ImageCatalog, ImageSpec
from kubesim.settings import SimSettings

REPO = Path(__file__).resolve().parents[2]
NAME = "horovod-elastic-examples:0.28.1"
UID = GID = 1000
SSHD_CONFIG = """\
Port 2222
HostKey /etc/ssh/host-keys/ssh_host_ed25519_key
PidFile /tmp/sshd.pid
UsePAM no
StrictModes yes
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers mpiuser
PermitUserEnvironment no
X11Forwarding no
PrintMotd no
LogLevel ERROR
"""
SSH_CONFIG_HEAD = """\
Host *
    Port 2222
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    ConnectionAttempts 10
"""


def build(root: Path, venv: Path) -> ImageSpec:
    """Writes the image's own files under `root` (owners and modes as the Dockerfile leaves
    them)."""
    (root / "root").mkdir(parents=True)
    os.chmod(root / "root", 0o755)
    ssh = root / "etc" / "ssh"
    keys = ssh / "host-keys"
    keys.mkdir(parents=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "ssh_host_ed25519_key")],
        check=True,
    )
    (ssh / "sshd_config").write_text(SSHD_CONFIG)
    (ssh / "ssh_config").write_text(SSH_CONFIG_HEAD + Path("/etc/ssh/ssh_config").read_text())
    for path in (keys, *keys.iterdir()):
        os.chown(path, UID, GID)
    os.chmod(keys, 0o700)
    os.chmod(keys / "ssh_host_ed25519_key", 0o600)
    home = root / "home" / "mpiuser"
    home.mkdir(parents=True)
    os.chown(home, UID, GID)
    os.chmod(home, 0o755)
    examples = root / "examples" / "elastic"
    examples.mkdir(parents=True)
    for script in ("pytorch_synthetic_elastic.py", "tensorflow2_mnist_elastic.py"):
        shutil.copy(REPO / "examples" / "elastic" / script, examples / script)
        os.chown(examples / script, UID, GID)
    path = f"{venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return ImageSpec(
        root=root,
        cmd=("/usr/sbin/sshd", "-De"),
        # One thread per process: six Horovod processes share this machine's two cores.
        env=(("PATH", path), ("HOME", "/home/mpiuser"), ("OMP_NUM_THREADS", "1")),
        working_dir="/home/mpiuser",
        passwd=("mpiuser:x:1000:1000::/home/mpiuser:/bin/bash",),
        group=("mpiuser:x:1000:",),
    )


SSHD = Path("/usr/sbin/sshd")
NEEDS_SSHD = pytest.mark.skipif(
    not SSHD.exists(), reason=f"{SSHD} missing: scripts/setup_mpi.sh installs openssh-server"
)
"""Without Debian's openssh-server every worker ends in StartError and a test only times out."""


def sim_settings(
    tmp_path_factory: pytest.TempPathFactory, venv: Path, **overrides: Any
) -> SimSettings:
    """kubesim's process runtime at a tenth of real time, serving this image built from `venv`."""
    spec = build(tmp_path_factory.mktemp("hvd-image"), venv)
    return SimSettings(
        runtime="process", time_scale=0.1, images=ImageCatalog({NAME: spec}), **overrides
    )
