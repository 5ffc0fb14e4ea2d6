"""The process that becomes one pod sandbox or one container (standard library only).

Run as `python shim.py sandbox HOSTNAME` or `python shim.py container` (the spec as JSON on stdin),
never inside kubesim: entering namespaces needs a single-threaded process. The chain kubesim -> shim
-> container init (pid 1 of its PID namespace) -> main process, each holding PR_SET_PDEATHSIG, means
nothing of a run outlives kubesim, even killed with SIGKILL (see "Containers: the shim and its chain
of processes" in docs/kubesim-process-runtime.md). A sandbox holds the pod's network, UTS and IPC
namespaces; a container joins them, mounts its root, files and volumes, and writes its output to a
CRI-format log. It prints `pid1 <host pid>`, then `started` or `error <message>`, for kubesim.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
CONTAINER_OWN_DIRS = ("/tmp", "/dev/shm", "/proc")
"""Mounted afresh in every container (`build_root`, `init`): what the host keeps there is not
seen."""
# A line longer than this is split into partial (`P`) records, as containerd does.
MAX_LOG_LINE = 16 * 1024
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def die_with_parent(expected_parent: int | None) -> None:
    """`expected_parent` None: the caller is pid 1 of a new PID namespace, whose parent it cannot
    see."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if expected_parent is not None and os.getppid() != expected_parent:
        # The parent died before the signal was armed.
        os._exit(137)


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, 0), f"setns {path}")
    finally:
        os.close(fd)


def mount(
    source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None
) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {source} on {target}",
    )


# --- sandbox -----------------------------------------------------------------------------------
def sandbox(hostname: str, tmpfs: list[list[str]]) -> None:
    """`tmpfs`: [directory, options] of the pod's memory-backed volumes, mounted in the sandbox's
    own mount namespace, which every container of the pod starts from."""
    die_with_parent(int(os.environ.get("KUBESIM_PARENT_PID", os.getppid())))
    unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    for directory, options in tmpfs:
        mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, options)
    socket.sethostname(hostname)
    print("ready", flush=True)
    while True:
        signal.pause()


# --- container: the root and the mounts ---------------------------------------------------------
MAX_SYMLINKS = 40


def _inside(root: str, path: str) -> str:
    """`path` of the container, resolved under `root` as the container would resolve it: a symlink
    in the image (like Debian's `/var/run -> /run`) is followed inside `root`, never to the
    machine's own files."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        here = os.path.join(root, *resolved, part)
        if os.path.islink(here):
            hops += 1
            if hops > MAX_SYMLINKS:
                raise OSError(errno.ELOOP, f"too many symlinks resolving {path}")
            link = os.readlink(here)
            if link.startswith("/"):
                resolved = []
            parts = [p for p in link.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def _make_target(path: str, is_file: bool) -> None:
    """Creates a mount point (already resolved by `_inside`, so it holds no symlink but the
    last)."""
    if is_file:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            with open(path, "a"):
                pass
    else:
        os.makedirs(path, exist_ok=True)


def build_root(spec: dict[str, Any]) -> str:
    """Mounts the container's root under its scratch directory and returns its path."""
    scratch = spec["scratch"]
    mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    upper, work, root = (os.path.join(scratch, d) for d in ("upper", "work", "root"))
    for d in (upper, work, root):
        os.mkdir(d)
    lower = "/"
    image = spec.get("image_root")
    if image:
        # overlayfs refuses a lower layer that lies inside another one (`/`), so the image is copied
        # into the tmpfs first; the stand-in images are small (programs live outside them).
        copy = os.path.join(scratch, "image")
        shutil.copytree(image, copy, symlinks=True)
        _copy_owners(image, copy)
        lower = f"{copy}:/"
    mount("overlay", root, "overlay", 0, f"lowerdir={lower},upperdir={upper},workdir={work}")
    for name, text in (spec.get("files") or {}).items():
        # A symlink at the file itself (a resolv.conf managed elsewhere) is replaced, not followed.
        target = os.path.join(_inside(root, os.path.dirname(name)), os.path.basename(name))
        if os.path.islink(target):
            os.unlink(target)
        _make_target(target, is_file=True)
        with open(target, "w") as f:
            f.write(text)
    mount("tmpfs", _inside(root, "/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("/dev", _inside(root, "/dev"), None, MS_BIND | MS_REC)
    mount("tmpfs", _inside(root, "/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("/sys", _inside(root, "/sys"), None, MS_BIND | MS_REC)
    for m in spec.get("mounts") or []:
        target = _inside(root, m["target"])
        _make_target(target, bool(m.get("is_file")))
        if m.get("create"):
            _make_sub_path(m["source"])
        mount(m["source"], target, None, MS_BIND | MS_REC)
        if m.get("read_only"):
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    return root


def _make_sub_path(source: str) -> None:
    """A missing subPath of a memory-backed emptyDir, made as the kubelet's SafeMakeDir would: here,
    because that tmpfs exists only in the pod's mount namespaces. Each new directory gets the mode
    of the volume's root (the tmpfs mount point above `source`), as SafeMakeDir copies the
    volume's."""
    missing: list[str] = []
    path = source
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    if not missing:
        return
    base = path
    while not os.path.ismount(base) and base != "/":
        base = os.path.dirname(base)
    perm = os.stat(base).st_mode & 0o7777
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            continue  # another container of the pod, starting at the same time, made it
        # mkdir(2) cuts the mode by the umask and drops the sticky bit.
        os.chmod(directory, perm)


def _copy_owners(src: str, dst: str) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        for name in [".", *dirnames, *filenames]:
            s = os.path.normpath(os.path.join(dirpath, name))
            st = os.lstat(s)
            os.lchown(os.path.join(dst, os.path.relpath(s, src)), st.st_uid, st.st_gid)


# --- container: the init and the main process ----------------------------------------------------
def exec_main(spec: dict[str, Any], out_w: int, err_w: int, status_w: int) -> None:
    """In the main process: drop to the container user and exec; never returns."""
    try:
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.setsid()
        os.setgroups(spec["groups"])
        os.setgid(spec["gid"])
        os.setuid(spec["uid"])
        os.umask(0o022)
        try:
            os.chdir(spec["cwd"])
        except OSError as exc:
            raise RuntimeError(
                f"chdir to cwd ({spec['cwd']!r}) set in config.json failed: {exc.strerror}"
            ) from exc
        env = dict(spec["env"])
        argv = spec["argv"]
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        try:
            os.execvpe(argv[0], argv, env)
        except FileNotFoundError as exc:
            why = (
                "executable file not found in $PATH"
                if "/" not in argv[0]
                else "no such file or directory"
            )
            raise RuntimeError(f'exec: "{argv[0]}": {why}') from exc
        except PermissionError as exc:
            raise RuntimeError(f'exec: "{argv[0]}": permission denied') from exc
    except BaseException as exc:  # reported to kubesim as a StartError
        os.write(status_w, str(exc).encode() or type(exc).__name__.encode())
        os._exit(128)


def init(spec: dict[str, Any], root: str, out_w: int, err_w: int, status_w: int) -> None:
    """pid 1 of the container: starts the main process, forwards signals, reaps; never returns."""
    try:
        # The shim waits for this process, so it cannot have died before the signal was armed.
        die_with_parent(None)
        mount("proc", _inside(root, "/proc"), "proc", MS_NOSUID | MS_NODEV)
        os.chroot(root)
        os.chdir("/")
    except BaseException as exc:
        os.write(status_w, f"container init: {exc}".encode())
        os._exit(128)
    main = os.fork()
    if main == 0:
        exec_main(spec, out_w, err_w, status_w)
    for fd in (out_w, err_w, status_w):
        os.close(fd)

    def forward(signum: int, _frame: object) -> None:
        # In a container the main process is pid 1, which the kernel shields from every signal it
        # does not handle: a SIGTERM to a program without a handler is lost, and only the SIGKILL
        # after the grace period ends it. This init stands in for that pid 1, so it passes on only
        # what the main process catches.
        if catches(main, signum):
            with contextlib.suppress(ProcessLookupError):
                os.kill(main, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == main:
            # Leaving now makes the kernel kill whatever the main process left behind.
            os._exit(
                os.waitstatus_to_exitcode(status)
                if os.WIFEXITED(status)
                else 128 + os.WTERMSIG(status)
            )


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (`SigCgt` in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        return False
    return False


class LogWriter:
    """CRI log lines for one container log file."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (kept open for the container's life)
        self._pending: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def _record(self, stream: str, tag: str, line: bytes) -> None:
        now = time.time_ns()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now // 1_000_000_000))
        self._file.write(
            f"{stamp}.{now % 1_000_000_000:09d}Z {stream} {tag} ".encode() + line + b"\n"
        )

    def feed(self, stream: str, data: bytes) -> None:
        buf = self._pending[stream] + data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl], buf[nl + 1 :]
            while len(line) > MAX_LOG_LINE:
                self._record(stream, "P", line[:MAX_LOG_LINE])
                line = line[MAX_LOG_LINE:]
            self._record(stream, "F", line)
        while len(buf) > MAX_LOG_LINE:
            self._record(stream, "P", buf[:MAX_LOG_LINE])
            buf = buf[MAX_LOG_LINE:]
        self._pending[stream] = buf

    def close(self) -> None:
        for stream, rest in self._pending.items():
            if rest:
                self._record(stream, "F", rest)
        self._file.close()


def container(spec: dict[str, Any]) -> int:
    die_with_parent(int(spec["parent_pid"]))
    log = LogWriter(spec["log"])
    sandbox_pid = spec["sandbox_pid"]
    for ns in ("ipc", "uts", "net", "mnt"):
        setns(f"/proc/{sandbox_pid}/ns/{ns}")
    unshare(CLONE_NEWNS | CLONE_NEWPID)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = build_root(spec)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    # Signals that arrive before pid 1 exists are held, then forwarded.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    pid1 = os.fork()
    if pid1 == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        for fd in (out_r, err_r, status_r):
            os.close(fd)
        init(spec, root, out_w, err_w, status_w)
    for fd in (out_w, err_w, status_w):
        os.close(fd)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid1, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    print(f"pid1 {pid1}", flush=True)
    failure = b""
    while chunk := _read(status_r):
        failure += chunk
    os.close(status_r)
    print(f"error {failure.decode(errors='replace')}" if failure else "started", flush=True)
    streams = {out_r: "stdout", err_r: "stderr"}
    while streams:
        try:
            ready, _, _ = select.select(list(streams), [], [])
        except InterruptedError:
            continue
        for fd in ready:
            data = _read(fd)
            if data:
                log.feed(streams[fd], data)
            else:
                os.close(fd)
                del streams[fd]
    log.close()
    while True:
        try:
            _, status = os.waitpid(pid1, 0)
            break
        except InterruptedError:
            continue
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "sandbox":
        sandbox(argv[1], json.loads(argv[2]) if len(argv) > 2 else [])
        return 0
    if argv[:1] == ["container"]:
        spec = json.loads(sys.stdin.read())
        try:
            return container(spec)
        except OSError as exc:
            print(f"error {exc}", flush=True)
            return 128
    print(
        "usage: shim.py sandbox HOSTNAME [TMPFS-JSON] | shim.py container < spec.json",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
