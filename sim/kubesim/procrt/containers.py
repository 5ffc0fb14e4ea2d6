"""One run of one container: the shim process seen from kubesim (start, signal, wait, exec inside).

The shim prints `pid1 <pid>` (the container's init, on the machine's PID numbering), then `started`
or `error <message>`; its exit code is the main process's (128 + signal when a signal ended it).
Killing the init kills the whole container: it is pid 1 of the container's PID namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesim.procrt.sandbox import SHIM, SandboxError

# Exit code of a run that never got its main process going (runc's StartError).
START_ERROR_EXIT_CODE = 128


@dataclass(frozen=True)
class BindMount:
    """One bind mount of a container; `create`: make the source directory first, inside the
    container's mount namespace (a subPath inside the pod's tmpfs, which only the pod's namespaces
    see)."""

    source: str
    target: str
    read_only: bool = False
    is_file: bool = False
    create: bool = False


@dataclass(frozen=True)
class RunSpec:
    """Everything the shim needs for one container run."""

    sandbox_pid: int
    scratch: Path
    log: Path
    argv: Sequence[str]
    env: Sequence[tuple[str, str]]
    cwd: str
    uid: int
    gid: int
    groups: Sequence[int]
    image_root: Path | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    mounts: Sequence[BindMount] = ()

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "parent_pid": os.getpid(),
            "sandbox_pid": self.sandbox_pid,
            "scratch": str(self.scratch),
            "log": str(self.log),
            "argv": list(self.argv),
            "env": [list(kv) for kv in self.env],
            "cwd": self.cwd,
            "uid": self.uid,
            "gid": self.gid,
            "groups": list(self.groups),
            "image_root": str(self.image_root) if self.image_root else None,
            "files": dict(self.files),
            "mounts": [m.__dict__ for m in self.mounts],
        }
        return json.dumps(doc)


class ContainerRun:
    """A started run. `error` is set when the main process could not be started."""

    def __init__(self, proc: asyncio.subprocess.Process, spec: RunSpec) -> None:
        self._proc = proc
        self.spec = spec
        self.pid1: int | None = None
        self.error: str | None = None
        self.exit_code: int | None = None

    @classmethod
    async def start(cls, spec: RunSpec) -> ContainerRun:
        spec.scratch.mkdir(parents=True, exist_ok=True)
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SHIM),
            "container",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        run = cls(proc, spec)
        try:
            await run._handshake()
        except BaseException:
            # Cancelled mid-start (the pod deleted, kubesim stopping): the shim, and with it the
            # container, must not outlive the run nobody will wait for.
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        return run

    async def _handshake(self) -> None:
        """Sends the spec and reads the shim's answer until `started` or an error."""
        proc = self._proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(self.spec.to_json().encode())
        await proc.stdin.drain()
        proc.stdin.close()
        while True:
            line = (await proc.stdout.readline()).decode(errors="replace").rstrip("\n")
            if not line:
                err = await proc.stderr.read() if proc.stderr else b""
                self.error = (
                    self.error
                    or f"container runtime failed: {err.decode(errors='replace')[-2000:]}"
                )
                return
            word, _, rest = line.partition(" ")
            if word == "pid1":
                self.pid1 = int(rest)
            elif word == "error":
                self.error = rest
                return
            elif word == "started":
                return

    @property
    def running(self) -> bool:
        return self.exit_code is None and self._proc.returncode is None

    async def wait(self) -> int:
        """The main process's exit code (START_ERROR_EXIT_CODE when it never started)."""
        if self.exit_code is None:
            code = await self._proc.wait()
            self.exit_code = START_ERROR_EXIT_CODE if self.error else code
        return self.exit_code

    def signal(self, signum: int) -> None:
        """Delivers `signum` to the main process (through the shim and the init)."""
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL to the container's init: every process of the container dies at once."""
        target = self.pid1 if self.pid1 is not None else self._proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)

    async def exec(self, argv: Sequence[str], time_limit: float) -> tuple[int, bytes]:
        """Runs `argv` inside the container, as its user, with its env and working directory."""
        if self.pid1 is None or not self.running:
            raise SandboxError("container is not running")
        spec = self.spec
        groups = ",".join(str(g) for g in spec.groups)
        setpriv = ["setpriv", f"--reuid={spec.uid}", f"--regid={spec.gid}"]
        setpriv += [f"--groups={groups}"] if groups else ["--clear-groups"]
        proc = await asyncio.create_subprocess_exec(
            "nsenter",
            f"--target={self.pid1}",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--root",
            "--wd",
            *setpriv,
            "--",
            # nsenter's --wd=DIR resolves DIR before entering the root; env -C resolves it inside.
            "env",
            "-C",
            spec.cwd,
            "--",
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(spec.env),
        )
        try:
            async with asyncio.timeout(time_limit):
                out, _ = await proc.communicate()
        except BaseException:
            # Timed out, or the probe that asked was stopped: the command must not outlive the ask.
            # It is killed, not nsenter, which then reaps it and exits: a killed nsenter would leave
            # its child (in the container's PID namespace) for the machine's init to reap, and until
            # then the container cannot end, its PID namespace waiting for every process in it.
            if not _kill_children(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await proc.wait()
            raise
        return int(proc.returncode or 0), out


def _kill_children(pid: int) -> bool:
    """SIGKILL to the children of process `pid`; False when it has none (or they cannot be
    listed)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return False
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
    return bool(children)
