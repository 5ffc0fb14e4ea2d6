"""The kubelet's AtomicWriter (`pkg/volume/util/atomic_writer.go`) and SetVolumeOwnership
(`pkg/volume/volume_linux.go`), on real directories.

A volume directory holds the payload in a timestamped `..<UTC time>.<random>` directory, a `..data`
link to it and one link per top-level entry (`hostfile -> ..data/hostfile`). An update writes a new
payload directory, renames a `..data_tmp` link over `..data` (one atomic step for readers), then
drops links to gone entries and the old directory: files never change in place.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kubesim.filecontent import FileContent

log = logging.getLogger(__name__)

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_FILE_NAME_LENGTH = 255
MAX_PATH_LENGTH = 4096
# What os.MkdirAll(os.ModePerm) gives a kubelet running with its usual umask 022; set explicitly so
# this process's umask does not matter.
PAYLOAD_DIR_MODE = 0o755
# volume_linux.go: what SetVolumeOwnership adds for the fsGroup.
RW_MASK = 0o660
RO_MASK = 0o440
EXEC_MASK = 0o110

SetPerms = Callable[[str], None]


class PayloadError(ValueError):
    """A payload path the kubelet refuses (absolute, `..`, too long)."""


def validate_path(path: str) -> None:
    """atomic_writer.go validatePath, with its messages."""
    if path == "":
        raise PayloadError('invalid path: must not be empty: ""')
    if path.startswith("/"):
        raise PayloadError(f"invalid path: must be relative path: {path}")
    if len(path) > MAX_PATH_LENGTH:
        raise PayloadError(
            f"invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        )
    items = path.split("/")
    for item in items:
        if item == "..":
            raise PayloadError(f"invalid path: must not contain '..': {path}")
        if len(item) > MAX_FILE_NAME_LENGTH:
            raise PayloadError(
                f"invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} "
                "characters"
            )
    if items[0].startswith("..") and len(items[0]) > 2:
        raise PayloadError(f"invalid path: must not start with '..': {path}")


def _clean(path: str) -> str:
    """filepath.Clean for the relative paths validate_path lets through."""
    return "/".join(part for part in path.split("/") if part not in ("", ".")) or "."


class AtomicWriter:
    """Atomically projects a payload (relative path -> content) into an existing directory."""

    def __init__(self, target_dir: Path, log_context: str = "") -> None:
        if not target_dir.exists():
            raise FileNotFoundError(
                errno.ENOENT, "volume directory does not exist", str(target_dir)
            )
        self.target_dir = target_dir
        self.log_context = log_context or str(target_dir)

    def write(self, payload: Mapping[str, FileContent], set_perms: SetPerms | None = None) -> bool:
        """Writes `payload` unless the current data already has this content and no extra entries.

        `set_perms(timestamped dir name)` runs after the new files are written and before they are
        published. Returns whether a new version was published.
        """
        for path in payload:
            validate_path(path)
        clean = {_clean(path): content for path, content in payload.items()}
        data_link = self.target_dir / DATA_DIR
        try:
            old_ts = os.readlink(data_link)
        except FileNotFoundError:
            old_ts = ""
        if old_ts and ("/" in old_ts or not old_ts.startswith("..")):
            # Only ever a sibling this writer made; never follow a link that was tampered with.
            raise PayloadError(f"{self.log_context}: unexpected {DATA_DIR} target {old_ts!r}")
        old_ts_path = self.target_dir / old_ts
        to_remove: set[str] = set()
        should_write = True
        if old_ts:
            to_remove = _paths_to_remove(clean, old_ts_path)
            if not _should_write_payload(clean, old_ts_path) and not to_remove:
                # Up to date; the user-visible links are still (re)made below (kubernetes#121472).
                should_write = False
                old_ts = ""
        if should_write:
            ts_dir = self._new_timestamp_dir()
            try:
                _write_payload(clean, ts_dir)
                if set_perms is not None:
                    set_perms(ts_dir.name)
                new_link = self.target_dir / NEW_DATA_DIR
                # A kubelet that crashed between symlink and rename would fail here forever; clear
                # it.
                with contextlib.suppress(FileNotFoundError):
                    new_link.unlink()
                os.symlink(ts_dir.name, new_link)
                os.rename(new_link, data_link)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    (self.target_dir / NEW_DATA_DIR).unlink()
                shutil.rmtree(ts_dir, ignore_errors=True)
                raise
        self._create_user_visible_files(clean)
        self._remove_user_visible_paths(to_remove)
        if old_ts:
            # os.RemoveAll: a version already gone is not an error.
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(old_ts_path)
        return should_write

    def _new_timestamp_dir(self) -> Path:
        prefix = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
        for _ in range(10000):
            # os.MkdirTemp's name: the prefix and a random uint32 in decimal.
            path = self.target_dir / f"{prefix}{random.getrandbits(32)}"
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                continue
            # 0755 lets group and other traverse to the files, whatever the umask.
            path.chmod(PAYLOAD_DIR_MODE)
            return path
        raise FileExistsError(
            errno.EEXIST, "no free timestamped directory name", str(self.target_dir)
        )

    def _create_user_visible_files(self, payload: Mapping[str, FileContent]) -> None:
        for path in payload:
            top = path.split("/", 1)[0]
            link = self.target_dir / top
            try:
                os.readlink(link)
            except FileNotFoundError:
                os.symlink(f"{DATA_DIR}/{top}", link)
            except OSError:
                # Something that is not a link (a nested mount point) already has the name; leave
                # it.
                continue

    def _remove_user_visible_paths(self, paths: set[str]) -> None:
        failure: OSError | None = None
        for path in paths:
            # Only links in the volume's root are user-visible; deeper entries go with the old
            # directory.
            if "/" in path:
                continue
            try:
                (self.target_dir / path).unlink(missing_ok=True)
            except OSError as err:
                log.error(
                    "%s: error pruning old user-visible path %s: %s", self.log_context, path, err
                )
                failure = err
        if failure is not None:
            raise failure


def _should_write_payload(payload: Mapping[str, FileContent], old_ts_path: Path) -> bool:
    """Content only, as the kubelet compares: a mode change alone is not rewritten."""
    for path, content in payload.items():
        try:
            on_disk = (old_ts_path / path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return True
        if on_disk != content.data:
            return True
    return False


def _paths_to_remove(payload: Mapping[str, FileContent], old_ts_path: Path) -> set[str]:
    """Entries of the current version that the new payload no longer has (parents of new files
    stay)."""
    current: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(old_ts_path):
        rel = os.path.relpath(dirpath, old_ts_path)
        for name in [*dirnames, *filenames]:
            current.add(name if rel == "." else f"{rel}/{name}")
    wanted: set[str] = set()
    for path in payload:
        while path:
            wanted.add(path)
            path = path.rpartition("/")[0]
    return current - wanted


def _make_dirs(path: Path, stop: Path) -> None:
    missing: list[Path] = []
    while path != stop and not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir()
        directory.chmod(PAYLOAD_DIR_MODE)


def _write_payload(payload: Mapping[str, FileContent], ts_dir: Path) -> None:
    for path, content in sorted(payload.items()):
        full = ts_dir / path
        _make_dirs(full.parent, ts_dir)
        mode = content.mode & 0o7777
        fd = os.open(
            full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            view = memoryview(content.data)
            while view:
                view = view[os.write(fd, view) :]
            # The mode given to open(2) was cut by the umask; the payload's mode must hold exactly.
            os.fchmod(fd, mode)
            if content.fs_user is not None:
                os.fchown(fd, content.fs_user, -1)
        finally:
            os.close(fd)


def set_volume_ownership(volume_dir: Path, fs_group: int | None, *, read_only: bool) -> None:
    """SetVolumeOwnership for a pod's `fsGroup`: every entry (children before their directory) gets
    the group, and all but symlinks gain group read (and write unless `read_only`); directories also
    gain the setgid bit and owner/group search. Without an fsGroup nothing changes."""
    if fs_group is None:
        return
    _walk_deep(volume_dir, lambda path, st: _change_file_permission(path, st, fs_group, read_only))


def _walk_deep(path: Path, visit: Callable[[Path, os.stat_result], None]) -> None:
    st = path.lstat()
    if stat.S_ISDIR(st.st_mode):
        for entry in os.scandir(path):
            _walk_deep(Path(entry.path), visit)
    visit(path, st)


def _change_file_permission(path: Path, st: os.stat_result, fs_group: int, read_only: bool) -> None:
    try:
        os.lchown(path, -1, fs_group)
    except OSError as err:
        log.error("Lchown failed on %s: %s", path, err)
    if stat.S_ISLNK(st.st_mode):
        # chmod would follow the link and widen the target's payload mode.
        return
    mask = RO_MASK if read_only else RW_MASK
    if stat.S_ISDIR(st.st_mode):
        mask |= stat.S_ISGID | EXEC_MASK
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) | mask)
    except OSError as err:
        log.error("chmod failed on %s: %s", path, err)
