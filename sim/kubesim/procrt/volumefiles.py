"""A pod's volumes on disk, as a kubelet keeps them, and where each container mounts them.

Every volume is a directory `<pod_dir>/volumes/<name>/`: configMap, secret, downwardAPI and
projected ones written by the AtomicWriter (`atomicwriter.py`) on `setup` and `refresh`, with the
kubelet's modes and fsGroup ownership; emptyDir (`medium: Memory` a tmpfs the mounter makes);
hostPath only under the caller's `host_path_root`. `mount_plan` lists each container's mounts in
containerd's order (parents first), the AtomicWriter kinds always read-only; a `subPath` is resolved
at container start (so it never updates) and refused when it leaves the volume. Long form:
docs/kubesim-process-runtime.md#volumes-on-disk. Put `pod_dir` on a tmpfs to keep Secrets off disk.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesim import downward, expansion
from kubesim.admission.quantity import QuantityError, parse_quantity
from kubesim.controllers.volumes import pod_fs_group
from kubesim.filecontent import FileContent
from kubesim.procrt.atomicwriter import AtomicWriter, PayloadError, set_volume_ownership

VOLUMES_DIR = "volumes"
VOLUMES_ROOT_MODE = 0o750  # the kubelet's pods/<uid>/volumes
EMPTY_DIR_MODE = 0o777  # emptydir.perm
TMPFS_ROOT_MODE = 0o1777  # a fresh tmpfs without a mode= option
NESTED_MOUNTPOINT_MODE = 0o755
HOST_PATH_DIR_MODE = 0o755
HOST_PATH_FILE_MODE = 0o644
ATOMIC_KINDS = ("configMap", "secret", "downwardAPI", "projected")
# Kinds whose kubelet directory is a tmpfs (wrappedVolumeSpec medium Memory); a configMap's is on
# disk.
_TMPFS_WRAPPED = ("secret", "downwardAPI", "projected")
_KINDS = (*ATOMIC_KINDS, "emptyDir", "hostPath")
_FILE_HOST_PATH_TYPES = ("File", "FileOrCreate", "Socket", "CharDevice", "BlockDevice")


class VolumeError(Exception):
    """A volume cannot be set up or mounted; the message is the kubelet's where it has one."""


class SubPathError(VolumeError):
    """A subPath the kubelet refuses; `detail` says why when the message (like the kubelet's) does
    not."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Mount:
    """One mount of a container. `source` is the path on this machine to bind (None: a tmpfs)."""

    volume: str
    target: str
    source: Path | None
    read_only: bool
    is_file: bool = False
    tmpfs: bool = False
    """A memory-backed emptyDir: one tmpfs per pod, shared by its containers (init containers
    included)."""
    size: int | None = None
    """tmpfs size in bytes: the volume's sizeLimit, the pod's memory limit or the node's memory."""
    tmpfs_mode: int = TMPFS_ROOT_MODE
    tmpfs_gid: int | None = None
    sub_path: str = ""
    """The volumeMount's subPath (expanded). For a tmpfs it is the path inside it to mount;
    otherwise the source already points at it, resolved through the volume's symlinks."""

    def tmpfs_options(self) -> str:
        """mount(2) data for the tmpfs: what the kubelet's mount plus SetVolumeOwnership amount
        to."""
        options = [f"mode={self.tmpfs_mode:o}"]
        if self.tmpfs_gid is not None:
            options.append(f"gid={self.tmpfs_gid}")
        if self.size:
            options.append(f"size={self.size}")
        return ",".join(options)


def volume_kind(volume: Mapping[str, Any]) -> str | None:
    return next((kind for kind in _KINDS if volume.get(kind) is not None), None)


def volume_dir(volumes_root: Path, name: str) -> Path:
    if not name or "/" in name or name in (".", ".."):
        raise VolumeError(f"invalid volume name {name!r}")
    return volumes_root / name


# --- setting volumes up ---------------------------------------------------------------------------
def setup(
    pod: Mapping[str, Any],
    pod_dir: Path,
    files_by_volume: Mapping[str, Mapping[str, FileContent]] | None = None,
    *,
    host_path_root: Path | None = None,
) -> None:
    """Makes every volume of `pod` under `<pod_dir>/volumes` before its first container starts.

    The payload of configMap / secret / downwardAPI / projected volumes is written when
    `files_by_volume` (the VolumeManager's snapshot) is given, else by the first `refresh`.
    Idempotent: an existing volume directory is kept, with its content. Raises VolumeError.
    """
    root = pod_dir / VOLUMES_DIR
    root.mkdir(mode=VOLUMES_ROOT_MODE, parents=True, exist_ok=True)
    fs_group = pod_fs_group(pod)
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = str(volume.get("name", ""))
        kind = volume_kind(volume)
        if kind in ATOMIC_KINDS:
            _setup_wrapped_dir(volume_dir(root, name), kind in _TMPFS_WRAPPED, fs_group)
        elif kind == "emptyDir":
            _setup_wrapped_dir(volume_dir(root, name), False, fs_group)
        elif kind == "hostPath":
            _setup_host_path(name, volume["hostPath"], host_path_root)
        else:
            raise VolumeError(
                f'volume "{name}": this kind of volume is not supported by the process runtime'
            )
    if files_by_volume is not None:
        refresh(pod, pod_dir, files_by_volume)


def refresh(
    pod: Mapping[str, Any], pod_dir: Path, files_by_volume: Mapping[str, Mapping[str, FileContent]]
) -> frozenset[str]:
    """Brings the written volumes up to date with a VolumeManager snapshot (the sync listener's
    `files`); returns the names of the volumes that got a new version. A volume absent from the
    snapshot (its source vanished) keeps what it has, as a kubelet's does. Raises VolumeError."""
    root = pod_dir / VOLUMES_DIR
    root.mkdir(mode=VOLUMES_ROOT_MODE, parents=True, exist_ok=True)
    fs_group = pod_fs_group(pod)
    meta = pod.get("metadata") or {}
    written: set[str] = set()
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name, kind = str(volume.get("name", "")), volume_kind(volume)
        if kind not in ATOMIC_KINDS or name not in files_by_volume:
            continue
        directory = volume_dir(root, name)
        _setup_wrapped_dir(directory, kind in _TMPFS_WRAPPED, fs_group)
        for nested in nested_mountpoints(pod, name):
            _make_nested_mountpoint(directory, nested)
        context = f"pod {meta.get('namespace', '')}/{meta.get('name', '')} volume {name}"
        writer = AtomicWriter(directory, context)

        def set_perms(_ts_dir: str, directory: Path = directory) -> None:
            # Over the whole volume: on a first write the links outside the timestamped dir are new
            # too.
            set_volume_ownership(directory, fs_group, read_only=True)

        try:
            if writer.write(files_by_volume[name], set_perms):
                written.add(name)
        except PayloadError as err:
            raise VolumeError(f'volume "{name}": {err}') from err
    return frozenset(written)


def _setup_wrapped_dir(directory: Path, tmpfs_root: bool, fs_group: int | None) -> None:
    """emptyDir SetUpAt, once per pod (the kubelet keeps a ready marker; the directory is ours)."""
    if directory.exists():
        return
    directory.mkdir()
    # mkdir(2) applies the umask; the kubelet chmods to get exactly 0777 (or the tmpfs root's 1777).
    directory.chmod(TMPFS_ROOT_MODE if tmpfs_root else EMPTY_DIR_MODE)
    set_volume_ownership(directory, fs_group, read_only=False)


def nested_mountpoints(pod: Mapping[str, Any], name: str) -> list[str]:
    """util.getNestedMountpoints: directories to make inside volume `name` so that other volumes can
    be mounted beneath its (read-only) mount; relative to the volume."""
    found: list[str] = []
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        mounts = container.get("volumeMounts") or []
        every = sorted(posixpath.normpath(str(m.get("mountPath", ""))) for m in mounts)
        for mine in (
            posixpath.normpath(str(m.get("mountPath", ""))) for m in mounts if m.get("name") == name
        ):
            if mine.startswith("../"):
                raise VolumeError(f"invalid container mount point {mine}")
            prefix = mine + "/"
            seen: list[str] = []
            for other in every:
                if not other.startswith(prefix) or any(other.startswith(s) for s in seen):
                    continue
                seen.append(other + "/")
                found.append(other[len(prefix) :])
    return found


def _make_nested_mountpoint(directory: Path, rel: str) -> None:
    path = directory
    for part in rel.split("/"):
        path = path / part
        if not path.is_symlink() and not path.exists():
            path.mkdir()
            path.chmod(NESTED_MOUNTPOINT_MODE)


def _setup_host_path(name: str, source: Mapping[str, Any], allowed: Path | None) -> None:
    """hostPath SetUp: the `type` check, and creation for the *OrCreate types within `allowed`."""
    path = Path(str(source.get("path", "")))
    kind = str(source.get("type") or "")
    if kind in ("DirectoryOrCreate", "FileOrCreate") and not os.path.lexists(path):
        real = Path(os.path.realpath(path))
        if allowed is None or not real.is_relative_to(os.path.realpath(allowed)):
            raise VolumeError(
                f'volume "{name}": kubesim creates hostPath {path} only under {allowed}'
            )
        if kind == "DirectoryOrCreate":
            real.mkdir(mode=HOST_PATH_DIR_MODE, parents=True)
        else:
            real.parent.mkdir(mode=HOST_PATH_DIR_MODE, parents=True, exist_ok=True)
            os.close(os.open(real, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, HOST_PATH_FILE_MODE))
    checks = {
        "Directory": (stat.S_ISDIR, "a directory"),
        "DirectoryOrCreate": (stat.S_ISDIR, "a directory"),
        "File": (stat.S_ISREG, "a file"),
        "FileOrCreate": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket file"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    if kind in checks:
        test, what = checks[kind]
        try:
            ok = test(os.stat(path).st_mode)
        except OSError:
            ok = False
        if not ok:
            raise VolumeError(f"hostPath type check failed: {path} is not {what}")


def teardown(pod_dir: Path) -> None:
    """Removes `<pod_dir>/volumes` and all in it, whoever owns the files and whatever their modes.

    Refuses (VolumeError) while anything is still mounted beneath it: deleting through a mount would
    delete what was mounted there.
    """
    root = pod_dir / VOLUMES_DIR
    if not os.path.lexists(root):
        return
    mounted = _mounts_under(Path(os.path.realpath(root)))
    if mounted:
        raise VolumeError(f"{root}: still mounted: {', '.join(mounted)}")
    if os.geteuid() != 0:
        # Without CAP_DAC_OVERRIDE a directory left read-only (by a container, say) cannot be
        # emptied.
        _make_owned_dirs_writable(root)
    # fd-based on Linux: never follows a symlink out of the tree.
    shutil.rmtree(root)


def _make_owned_dirs_writable(path: Path) -> None:
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        return
    if st.st_uid == os.geteuid():
        with contextlib.suppress(OSError):
            path.chmod(stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:
            _make_owned_dirs_writable(Path(entry.path))


def _mounts_under(root: Path) -> list[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            point = _unescape_mountinfo(fields[4])
            if point == str(root) or point.startswith(str(root).rstrip("/") + "/"):
                found.append(point)
    return found


def _unescape_mountinfo(text: str) -> str:
    """The kernel writes space, tab, newline and backslash in mount points as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


# --- where containers mount them ------------------------------------------------------------------
def mount_plan(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    volumes_root: Path,
    *,
    env: Mapping[str, str],
) -> list[Mount]:
    """The mounts of `container` (`volumes_root` is `<pod_dir>/volumes`), in mount order. `env` is
    the container's whole environment as the kubelet resolved it, which `subPathExpr` expands with.

    Writes nothing. It reads the disk to resolve subPaths through symlinks and to tell a file from a
    directory, so call it when the container starts; a subPath that does not exist yet gets its
    lexical source (`prepare_container` creates it first, as the kubelet does). Raises VolumeError /
    SubPathError.
    """
    volumes = {str(v.get("name", "")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    container_name = str(container.get("name", ""))
    plan: list[Mount] = []
    for mount in container.get("volumeMounts") or []:
        name = str(mount.get("name", ""))
        volume = volumes.get(name)
        if volume is None:
            raise VolumeError(
                f'cannot find volume "{name}" to mount into container "{container_name}"'
            )
        kind = volume_kind(volume)
        target = posixpath.normpath("/" + str(mount.get("mountPath", "")).lstrip("/"))
        sub_path = _sub_path(pod, container, mount, env)
        read_only = bool(mount.get("readOnly")) or kind in ATOMIC_KINDS
        if kind == "emptyDir" and (volume["emptyDir"] or {}).get("medium") == "Memory":
            plan.append(_memory_mount(pod, volume, target, read_only, sub_path))
            continue
        if kind == "hostPath":
            base = Path(str(volume["hostPath"].get("path", "")))
        elif kind in _KINDS:
            base = volume_dir(volumes_root, name)
        else:
            raise VolumeError(
                f'volume "{name}": this kind of volume is not supported by the process runtime'
            )
        source = _resolve_sub_path(base, sub_path, name, container_name) if sub_path else base
        if (
            kind == "hostPath"
            and not sub_path
            and volume["hostPath"].get("type") in _FILE_HOST_PATH_TYPES
        ):
            is_file = True
        else:
            is_file = os.path.exists(source) and not os.path.isdir(source)
        plan.append(Mount(name, target, source, read_only, is_file=is_file, sub_path=sub_path))
    # containerd's orderedMounts: a stable sort on the number of separators in the container path.
    return sorted(plan, key=lambda m: m.target.count("/"))


def _memory_mount(
    pod: Mapping[str, Any], volume: Mapping[str, Any], target: str, read_only: bool, sub_path: str
) -> Mount:
    fs_group = pod_fs_group(pod)
    return Mount(
        volume=str(volume.get("name", "")),
        target=target,
        source=None,
        read_only=read_only,
        tmpfs=True,
        size=tmpfs_size(pod, volume["emptyDir"] or {}),
        tmpfs_mode=TMPFS_ROOT_MODE | (stat.S_ISGID if fs_group is not None else 0),
        tmpfs_gid=fs_group,
        sub_path=sub_path,
    )


def pod_tmpfs(pod: Mapping[str, Any], volumes_root: Path) -> list[tuple[Path, str]]:
    """The pod's memory-backed emptyDirs: (directory, tmpfs options). The sandbox mounts each once,
    in its own mount namespace, so every container of the pod shares it and the machine never sees
    it."""
    found = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if (
            volume_kind(volume) == "emptyDir"
            and (volume["emptyDir"] or {}).get("medium") == "Memory"
        ):
            mount = _memory_mount(pod, volume, "/", False, "")
            found.append((volume_dir(volumes_root, mount.volume), mount.tmpfs_options()))
    return found


def prepare_container(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    volumes_root: Path,
    *,
    env: Mapping[str, str],
) -> list[Mount]:
    """What the kubelet does at each container start: creates a missing subPath as a directory (with
    the volume directory's mode, never outside the volume), then returns `mount_plan`."""
    volumes = {str(v.get("name", "")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        sub_path = _sub_path(pod, container, mount, env)
        volume = volumes.get(str(mount.get("name", "")))
        if not sub_path or volume is None:
            continue
        kind = volume_kind(volume)
        if kind == "emptyDir" and (volume["emptyDir"] or {}).get("medium") == "Memory":
            continue
        if kind == "hostPath":
            base = Path(str(volume["hostPath"].get("path", "")))
        else:
            base = volume_dir(volumes_root, str(mount.get("name", "")))
        if not os.path.lexists(base / sub_path):
            safe_make_dir(
                base, sub_path, str(mount.get("name", "")), str(container.get("name", ""))
            )
    return mount_plan(pod, container, volumes_root, env=env)


def _sub_path(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    mount: Mapping[str, Any],
    env: Mapping[str, str],
) -> str:
    sub_path = str(mount.get("subPath") or "")
    if mount.get("subPathExpr"):
        sub_path = expand_sub_path_expr(str(mount["subPathExpr"]), env)
    if not sub_path:
        return ""
    if sub_path.startswith("/"):
        raise SubPathError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise SubPathError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")
    return sub_path


def _resolve_sub_path(base: Path, sub_path: str, volume: str, container: str) -> Path:
    lexical = base / sub_path
    if not os.path.lexists(lexical):
        return lexical
    real_base, real = os.path.realpath(base), os.path.realpath(lexical)
    if real != real_base and not real.startswith(real_base.rstrip("/") + "/"):
        raise SubPathError(
            f'failed to prepare subPath for volumeMount "{volume}" of container "{container}"',
            f"path {real} is outside of allowed base {real_base}",
        )
    return Path(real)


def safe_make_dir(base: Path, sub_path: str, volume: str = "", container: str = "") -> None:
    """subpath.SafeMakeDir: creates `base/sub_path` one directory at a time through directory fds,
    so that no component can be swapped for a symlink leading out of `base`; modes copy `base`'s."""
    real_base = os.path.realpath(base)
    perm = stat.S_IMODE(os.stat(real_base).st_mode)
    parts = [p for p in sub_path.split("/") if p not in ("", ".")]
    existing = 0
    while existing < len(parts) and os.path.lexists(
        os.path.join(real_base, *parts[: existing + 1])
    ):
        existing += 1
    real_existing = os.path.realpath(os.path.join(real_base, *parts[:existing]))
    if real_existing != real_base and not real_existing.startswith(real_base.rstrip("/") + "/"):
        raise SubPathError(
            f'failed to create subPath directory for volumeMount "{volume}" of container '
            f'"{container}"',
            f"path {real_existing} is outside of allowed base {real_base}",
        )
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(real_existing, flags)
    try:
        for part in parts[existing:]:
            os.mkdir(part, 0o700, dir_fd=fd)
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
            # mkdir(2) cut the mode by the umask and dropped the special bits; the volume's mode
            # holds.
            os.fchmod(fd, perm)
    finally:
        os.close(fd)


def tmpfs_size(pod: Mapping[str, Any], empty_dir: Mapping[str, Any]) -> int:
    """calculateEmptyDirMemorySize: the node's allocatable memory, lowered to the pod's memory limit
    (when every container has one) and to the volume's sizeLimit."""
    size = _bytes(downward.NODE_ALLOCATABLE["memory"])
    spec = pod.get("spec") or {}
    apps, inits = spec.get("containers") or [], spec.get("initContainers") or []
    limits = [
        ((c.get("resources") or {}).get("limits") or {}).get("memory") for c in [*apps, *inits]
    ]
    if limits and all(limits):
        app_sum = sum(
            _bytes(((c.get("resources") or {}).get("limits") or {})["memory"]) for c in apps
        )
        init_max = max((_bytes(c["resources"]["limits"]["memory"]) for c in inits), default=0)
        pod_limit = max(app_sum, init_max)
        if 0 < pod_limit <= size:
            size = pod_limit
    if empty_dir.get("sizeLimit") is not None:
        limit = _bytes(empty_dir["sizeLimit"])
        if 0 < limit <= size:
            size = limit
    return size


def _bytes(quantity: Any) -> int:
    try:
        return math.ceil(parse_quantity(quantity).value)
    except QuantityError as err:
        raise VolumeError(str(err)) from err


# --- subPathExpr ----------------------------------------------------------------------------------
def expand_sub_path_expr(expr: str, env: Mapping[str, str]) -> str:
    """kubecontainer.ExpandContainerVolumeMounts: every `$(VAR)` must have a non-empty value."""
    missing: set[str] = set()

    def value(key: str) -> str:
        if not env.get(key):
            missing.add(key)
        return env.get(key, "")

    expanded = expansion.expand(expr, value)
    if missing:
        raise VolumeError(f"missing value for {', '.join(sorted(missing))}")
    return expanded
