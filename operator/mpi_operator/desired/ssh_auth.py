"""How the SSH Secret reaches the launcher and the workers: volumes, mounts and, for non-root users, a copy.

Root (`sshAuthMountPath: /root/.ssh`, upstream's default): exactly upstream. The Secret volume `ssh-auth`
(items `ssh-privatekey` -> `id_rsa`, `ssh-publickey` -> `id_rsa.pub` and `authorized_keys`,
`defaultMode: 0600`) is mounted at the path on `containers[0]`.

Any other path (a non-root user): upstream mounts the same volume without a mode, so the kubelet writes
the files `0644` and owned by root. The private key is then world-readable and `authorized_keys` sits in a
root-owned, kubelet-managed directory of symlinks, so sshd with `StrictModes yes` refuses it and
upstream's images have to switch StrictModes off. We instead give the container a private copy:

1. the Secret volume `ssh-auth` is mounted only into a short init container `ssh-auth-setup`, at a
   staging path; mode `0440` when the pod has an `fsGroup` (the kubelet makes the files group-owned by
   it, so the user can read them through that supplemental group), `0444` otherwise (the user may be
   any uid). Either way the readable copy exists only in that init container's mount namespace, which
   has exited before the main container starts;
2. the init container runs the main container's image with its `securityContext` (pod-level settings
   such as `runAsUser`/`fsGroup` apply to it anyway), so it runs as the very user sshd and mpirun run as.
   With `umask 077` it creates `ssh/` on a memory-backed emptyDir (`ssh-auth-home`), `chmod 700`, and
   writes `id_rsa`, `id_rsa.pub` and `authorized_keys` `0600` (temp file + rename, so a restarted init
   container never leaves a half-written key);
3. the main container mounts that emptyDir with `subPath: ssh` at `sshAuthMountPath`. The mount point
   is the directory the user created: owned by the user, `0700`, files `0600`, which is exactly what
   sshd's StrictModes (`secure_filename`) and the ssh client's private-key check demand. The emptyDir's
   own root (world-writable, kubelet-owned) is never on the path.

The helper copies only the main container's cpu/memory requests and limits (so quotas that demand
limits admit the pod and the pod's effective request is unchanged), never its GPUs.
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
    """Adds the SSH volumes and mounts to `pod_spec` (a copy the caller owns), upstream's `setupSSHOnPod`."""
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
