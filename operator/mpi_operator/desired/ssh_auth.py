"""How the SSH Secret reaches the launcher and the workers: volumes, mounts, for non-root a copy.

Root (`sshAuthMountPath: /root/.ssh`): exactly upstream, the Secret volume `ssh-auth` at mode 0600.
Any other path: upstream's mount leaves the key world-readable in a root-owned directory, which
sshd's StrictModes refuses. Instead an init container `ssh-auth-setup`, running the main image as
the same user, copies the keys from a staging mount onto a memory-backed emptyDir (`ssh/` 0700,
files 0600, temp file + rename), and the main container mounts that `subPath: ssh` at the path:
owned by the user, as StrictModes demands. The init container copies only the main container's
cpu/memory requests and limits, never its GPUs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.api.models import MPIJob
from mpi_operator.api.quantities import cpu_and_memory
from mpi_operator.desired import naming
from mpi_operator.desired.secret import PRIVATE_KEY, PUBLIC_KEY
from mpi_operator.objects import KubeObject

ROOT_SSH_PATH: Final = "/root/.ssh"
SSH_AUTH_VOLUME: Final = "ssh-auth"
SSH_HOME_VOLUME: Final = "ssh-auth-home"
SSH_SETUP_CONTAINER: Final = "ssh-auth-setup"
STAGING_SECRET_PATH: Final = "/var/run/mpi-operator/ssh-secret"
STAGING_HOME_PATH: Final = "/var/run/mpi-operator/ssh-home"
HOME_SUBPATH: Final = "ssh"
ROOT_DEFAULT_MODE: Final = 0o600
FS_GROUP_STAGING_MODE: Final = 0o440
STAGING_MODE: Final = 0o444

SSH_FILES: Final = ("id_rsa", "id_rsa.pub", "authorized_keys")

_SETUP_SCRIPT: Final = (
    "set -eu\n"
    "umask 077\n"
    f'dst="{STAGING_HOME_PATH}/{HOME_SUBPATH}"\n'
    'mkdir -p "$dst"\n'
    'chmod 700 "$dst"\n'
    f"for f in {' '.join(SSH_FILES)}; do\n"
    f'  cat "{STAGING_SECRET_PATH}/$f" > "$dst/$f.tmp"\n'
    '  chmod 600 "$dst/$f.tmp"\n'
    '  mv -f "$dst/$f.tmp" "$dst/$f"\n'
    "done\n"
)


def ssh_volume_items() -> list[KubeObject]:
    """Upstream `sshVolumeItems`."""
    return [
        {"key": PRIVATE_KEY, "path": "id_rsa"},
        {"key": PUBLIC_KEY, "path": "id_rsa.pub"},
        {"key": PUBLIC_KEY, "path": "authorized_keys"},
    ]


def is_root_path(job: MPIJob) -> bool:
    return job.spec.ssh_auth_mount_path == ROOT_SSH_PATH


def _secret_volume(job: MPIJob, mode: int) -> KubeObject:
    return {
        "name": SSH_AUTH_VOLUME,
        "secret": {
            "secretName": naming.ssh_secret_name(job),
            "items": ssh_volume_items(),
            "defaultMode": mode,
        },
    }


def _has_fs_group(pod_spec: Mapping[str, Any]) -> bool:
    context = pod_spec.get("securityContext")
    return isinstance(context, Mapping) and context.get("fsGroup") is not None


def _setup_container(main: Mapping[str, Any]) -> KubeObject:
    container: KubeObject = {
        "name": SSH_SETUP_CONTAINER,
        "command": ["/bin/sh", "-c", _SETUP_SCRIPT],
        "volumeMounts": [
            {"name": SSH_AUTH_VOLUME, "mountPath": STAGING_SECRET_PATH, "readOnly": True},
            {"name": SSH_HOME_VOLUME, "mountPath": STAGING_HOME_PATH},
        ],
    }
    if main.get("image"):
        container["image"] = main["image"]
    if main.get("imagePullPolicy"):
        container["imagePullPolicy"] = main["imagePullPolicy"]
    if isinstance(main.get("securityContext"), Mapping):
        container["securityContext"] = copy.deepcopy(main["securityContext"])
    resources = cpu_and_memory(main.get("resources"))
    if resources:
        container["resources"] = resources
    return container


def setup_ssh_on_pod(pod_spec: KubeObject, job: MPIJob) -> None:
    """Adds the SSH volumes and mounts to `pod_spec` (a copy the caller owns), upstream's
    `setupSSHOnPod`."""
    main = pod_spec["containers"][0]
    volumes = pod_spec.setdefault("volumes", [])
    mounts = main.setdefault("volumeMounts", [])
    path = job.spec.ssh_auth_mount_path
    if is_root_path(job):
        volumes.append(_secret_volume(job, ROOT_DEFAULT_MODE))
        mounts.append({"name": SSH_AUTH_VOLUME, "mountPath": path})
        return
    mode = FS_GROUP_STAGING_MODE if _has_fs_group(pod_spec) else STAGING_MODE
    volumes.append(_secret_volume(job, mode))
    volumes.append({"name": SSH_HOME_VOLUME, "emptyDir": {"medium": "Memory"}})
    pod_spec.setdefault("initContainers", []).append(_setup_container(main))
    mounts.append({"name": SSH_HOME_VOLUME, "mountPath": path, "subPath": HOME_SUBPATH})
