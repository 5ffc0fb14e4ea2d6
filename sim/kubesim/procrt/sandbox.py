"""Pod sandboxes and the pod network of the process runtime, and the runtime's state directory.

Every namespace is held by a process (a `shim.py sandbox` "pause" process), never by a name under
/run/netns: when the holder dies the kernel frees the namespace and its links, so a killed run
leaves no network behind. The bridge `cbr0` lives in a namespace of its own, with the gateway
address; each pod's `eth0` is one end of a veth pair whose other end is enslaved to the bridge. No
link ever touches the machine's own namespace, so pod traffic cannot leave the pods and the bridge.

The state directory (`$TMPDIR/kubesim-procrt/<pid>-<token>/`) holds volumes and logs; it is the only
thing the runtime leaves on the machine's disk, and it is locked for the life of the runtime so that
the next start can tell a dead run's leftovers from a live one's and remove them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SHIM = Path(__file__).with_name("shim.py")
BRIDGE = "cbr0"
STATE_BASE_NAME = "kubesim-procrt"


class SandboxError(RuntimeError):
    """A namespace, link or process of the runtime could not be set up."""


@dataclass
class Holder:
    """A pause process that holds a network, UTS and IPC namespace."""

    proc: asyncio.subprocess.Process

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def netns(self) -> str:
        return f"/proc/{self.proc.pid}/ns/net"

    @classmethod
    async def start(cls, hostname: str, tmpfs: list[tuple[Path, str]] | None = None) -> Holder:
        """`tmpfs`: (directory, mount options) to mount in the sandbox's mount namespace."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SHIM),
            "sandbox",
            hostname,
            json.dumps([[str(d), o] for d, o in tmpfs or []]),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBESIM_PARENT_PID": str(os.getpid())},
        )
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if line.strip() != b"ready":
            err = await proc.stderr.read() if proc.stderr else b""
            await proc.wait()
            raise SandboxError(
                f"pod sandbox for {hostname!r} did not start: {err.decode(errors='replace')}"
            )
        return cls(proc)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()


class PodNetwork:
    """The bridge namespace, pod IP allocation is the kubelet's (`PodIPs`); this owns links and
    routes."""

    def __init__(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        self.network = network
        self.gateway = str(network.network_address + 1)
        self._bridge: Holder | None = None
        self._links = 0

    @property
    def netns(self) -> str:
        if self._bridge is None:
            raise SandboxError("the pod network is not started")
        return self._bridge.netns

    async def start(self) -> None:
        self._bridge = await Holder.start("kubesim-bridge")
        await self._ip(
            self.netns,
            f"link add {BRIDGE} type bridge",
            f"addr add {self.gateway}/{self.network.prefixlen} dev {BRIDGE}",
            f"link set {BRIDGE} up",
            "link set lo up",
        )

    async def attach(self, sandbox: Holder, ip: str) -> None:
        """Gives the sandbox `eth0` with `ip`, cabled to the bridge, and the default route via the
        gateway."""
        self._links += 1
        host_end = f"ksv{self._links:x}"
        await self._ip(
            self.netns,
            f"link add {host_end} type veth peer name eth0 netns {sandbox.pid}",
            f"link set {host_end} master {BRIDGE}",
            f"link set {host_end} up",
        )
        await self._ip(
            sandbox.netns,
            "link set lo up",
            f"addr add {ip}/{self.network.prefixlen} dev eth0",
            "link set eth0 up",
            f"route add default via {self.gateway}",
        )

    async def stop(self) -> None:
        if self._bridge is not None:
            await self._bridge.stop()
            self._bridge = None

    @staticmethod
    async def _ip(netns: str, *commands: str) -> None:
        # One `ip -batch` per namespace: the commands must all apply in that namespace.
        script = "\n".join(commands) + "\n"
        proc = await asyncio.create_subprocess_exec(
            "nsenter",
            f"--net={netns}",
            "ip",
            "-batch",
            "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate(script.encode())
        if proc.returncode != 0:
            raise SandboxError(f"ip in {netns}: {err.decode(errors='replace').strip()}")


class StateDir:
    """The runtime's directory on disk, locked while the runtime lives; `sweep` removes dead runs'
    ones."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base or Path(tempfile.gettempdir()) / STATE_BASE_NAME
        self.base.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.swept = sweep(self.base)
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        # Made and locked under a dot name, then renamed: a sweep never sees it unlocked.
        making = self.base / f".{name}"
        making.mkdir(mode=0o755)
        self._lock = os.open(making / ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.path = self.base / name
        making.rename(self.path)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)


def sweep(base: Path) -> list[Path]:
    """Removes the state directories of runs that are gone (their lock is free); returns them."""
    removed = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        if entry.name.startswith(".") and _pid_alive(entry.name[1:].split("-")[0]):
            continue
        lock = entry / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = -1
        except OSError:
            continue
        try:
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        # Free lock (or none, a run killed while creating it): the run is gone.
        shutil.rmtree(entry, ignore_errors=True)
        if fd >= 0:
            os.close(fd)
        removed.append(entry)
        log.info("kubesim process runtime: removed %s, left by a run that ended", entry)
    return removed


def _pid_alive(text: str) -> bool:
    try:
        os.kill(int(text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
