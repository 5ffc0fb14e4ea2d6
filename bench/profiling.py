"""Sampling profiles of the benchmark's processes with py-spy (a dev dependency), attached from
outside so the measured processes run unchanged: `py-spy record --gil --format raw` writes collapsed
stacks of the thread holding the GIL (running Python, not waiting in a system call such as a write
to a full pipe), read here into the functions that hold the most samples. py-spy needs ptrace rights
over the process (root, or `kernel.yama.ptrace_scope` 0); when it cannot attach, the report says so
instead of a profile."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

RATE: Final = 50
"""Samples per second: enough for a top list over tens of seconds, little load on a 2-core
machine."""


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profile:
    """One `py-spy record` of one process, from `start` until `stop`."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.proc: asyncio.subprocess.Process | None = None
        self.error = ""

    async def start(self) -> None:
        exe = _py_spy()
        if exe is None:
            self.error = "py-spy is not installed (pip install 'elastic-mpi-operator[dev]')"
            return
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = await asyncio.create_subprocess_exec(
            *(exe, "record", "--pid", str(self.pid), "--rate", str(RATE), "--nonblocking", "--gil"),
            *("--format", "raw", "--output", str(self.out)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )

    async def stop(self) -> dict[str, Any]:
        """Ends the recording (py-spy writes its file on SIGINT) and returns its summary."""
        if self.proc is None:
            return {"error": self.error}
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = await asyncio.wait_for(self.proc.communicate(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            return {"error": "py-spy did not stop within 60 s"}
        if not self.out.exists() or not self.out.stat().st_size:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [
                f"exit {self.proc.returncode}"
            ]
            return {"error": f"py-spy wrote no profile: {tail[0]}"}
        collapsed = by_function(self.out.read_text())
        self.out.write_text(collapsed)
        return {"file": self.out.name, **top_functions(collapsed)}


IDLE: Final = ("EpollSelector.select ", "_worker (", "Condition.wait ", "Event.wait ")
"""Leaf frames that are waits, not work: the event loop's select, idle executor threads."""
OWN: Final = ("mpi_operator/", "kubesim/", "mpi_discovery/")
ENTRY: Final = ("mpi_operator/cli.py", "mpi_operator/__main__.py", "kubesim/cli.py")


def _frame(frame: str) -> str:
    """`name (path/module.py:123)` -> `name (path/module.py)`: one row per function, not per
    line."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rstrip(')').rsplit(':', 1)[0]})"


def by_function(collapsed: str) -> str:
    """The same collapsed stacks with the line numbers dropped and equal stacks merged: a tenth of
    the size, still the format every flame graph tool reads."""
    merged: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            merged[";".join(_frame(f) for f in stack.split(";"))] += int(count)
    return "".join(f"{stack} {n}\n" for stack, n in sorted(merged.items()))


def stacks(collapsed: str) -> Iterator[tuple[list[str], int]]:
    """(frames root first, samples) of every stack in py-spy's collapsed format (`f;f;...
    count`)."""
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [
            _frame(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))
        ]
        if frames:
            yield frames, int(count)


def is_busy(frames: list[str]) -> bool:
    """Not a wait in the event loop's select or an idle thread."""
    return not frames[-1].startswith(IDLE)


def top_functions(collapsed: str, limit: int = 15) -> dict[str, Any]:
    """The samples, the busy ones, and of the busy samples, the functions most often on top of the
    stack (self) and this project's functions most often anywhere in it (inclusive; the command
    line's entry points left out)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = busy = 0
    for frames, n in stacks(collapsed):
        total += n
        if not is_busy(frames):
            continue
        busy += n
        own[frames[-1]] += n
        for f in set(frames):
            path = f.rsplit(" (", 1)[-1]
            if path.startswith(OWN) and not path.startswith(ENTRY):
                inclusive[f] += n
    return {
        "samples": total,
        "busy": busy,
        "self": [(f, n / busy) for f, n in own.most_common(limit)] if busy else [],
        "inclusive": [(f, n / busy) for f, n in inclusive.most_common(limit)] if busy else [],
    }
