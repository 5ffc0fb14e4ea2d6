"""The operator replicas of a chaos run: `mpi-operator run` processes with leader election,
SIGKILLed, stopped and restarted as a Deployment would, their stderr read for tracebacks.

Each replica has a slot name ("a", "b") that survives restarts; each process gets a new
leader-election identity (`<hostname>_<uuid>`), read from its "waiting to acquire lease ... as
<identity>" log line, so the Lease's holder says which slot leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[2]
TAIL_LINES = 30
"""The stderr lines a replica keeps for the report when something went wrong."""


RESUMING = re.compile(r"resuming in ([0-9.]+)s")


def _monotonic(stamp: str) -> float:
    """A log line's wall-clock stamp on this process's monotonic clock (now, if it has none)."""
    try:
        wall = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.monotonic()
    return wall - time.time() + time.monotonic()


def child_env() -> dict[str, str]:
    """This checkout's source roots first on PYTHONPATH, whichever checkout the virtualenv's
    editable install points at (as tests/operator_testing.py's `source_env`)."""
    roots = [str(ROOT / r) for r in ("operator", "discovery", "sim")]
    inherited = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*roots, *([inherited] if inherited else [])]),
    }


@dataclass
class Replica:
    slot: str
    kubeconfig: Path
    lease_namespace: str
    log_dir: Path
    """Each process's stderr goes to `replica-<slot>-<start>.log` here, whole."""
    proc: asyncio.subprocess.Process | None = None
    identity: str = ""
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    """Return codes of the processes that ended (-9 for a SIGKILL)."""
    tracebacks: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    blind: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Identity -> the (start, end) monotonic times its MPIJob informer waited to retry a failed
    LIST or WATCH (from its "mpijobs[*]: ... resuming in N s" lines): it could not see a deletion
    meanwhile."""
    _reader: asyncio.Task[None] | None = None
    _identified: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        flags = [
            "--kubeconfig",
            str(self.kubeconfig),
            "--leader-elect",
            "--lease-namespace",
            self.lease_namespace,
        ]
        flags += ["--metrics-address", "127.0.0.1:0", "--log-format", "json"]
        self._identified = asyncio.Event()
        self.proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "mpi_operator", "run", *flags),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(),
            cwd=ROOT,
        )
        self.starts += 1
        log = self.log_dir / f"replica-{self.slot}-{self.starts}.log"
        self._reader = asyncio.create_task(
            self._read(self.proc, log), name=f"replica-{self.slot}-stderr"
        )
        async with asyncio.timeout(60):
            await self._identified.wait()

    async def _read(self, proc: asyncio.subprocess.Process, log: Path) -> None:
        assert proc.stderr is not None
        with log.open("w") as out:
            await self._lines(proc.stderr, out)
        rc = await proc.wait()
        self.exits.append(rc)
        self._identified.set()  # a process that died before naming itself must not hang `start`

    async def _lines(self, stderr: asyncio.StreamReader, out: TextIO) -> None:
        traceback: list[str] | None = None
        async for raw in stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            out.write(line + "\n")
            self.tail.append(line)
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict):
                # A traceback Python printed itself (an uncaught exception): lines until the next
                # JSON.
                if line.startswith("Traceback (most recent call last)"):
                    traceback = [line]
                    self.tracebacks.append(line)
                elif traceback is not None:
                    traceback.append(line)
                    self.tracebacks[-1] = "\n".join(traceback)
                continue
            traceback = None
            msg = str(entry.get("msg", ""))
            if msg.startswith("mpijobs[") and (wait := RESUMING.search(msg)) and self.identity:
                at = _monotonic(str(entry.get("ts", "")))
                self.blind.setdefault(self.identity, []).append((at, at + float(wait[1])))
            if "exc" in entry:
                self.tracebacks.append(f"{msg}\n{entry['exc']}")
            if msg.startswith("waiting to acquire lease ") and " as " in msg:
                self.identity = msg.rsplit(" as ", 1)[1]
                self._identified.set()

    async def kill(self) -> None:
        """SIGKILL: no lease release, no drain; the successor waits for the lease to expire."""
        await self._end(signal.SIGKILL)

    async def stop(self) -> None:
        """SIGTERM: a graceful stop that releases the lease, so a standby takes over at once."""
        await self._end(signal.SIGTERM)

    async def _end(self, how: signal.Signals) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(how)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
