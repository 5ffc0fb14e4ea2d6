"""The real operator (manager + MPIJob reconciler, no leader election) run inside a test process.

Shared by the reconcile and elastic suites, the install checks, the examples and the docs tests, so
that every one of them drives the operator the same way `mpi-operator run` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubesim.app import KubeSim
from mpi_operator.controller import manager
from mpi_operator.controller.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
from mpi_operator.settings import Settings


def operator_settings(kubesim: KubeSim, **overrides: Any) -> Settings:
    """Settings for an operator talking to `kubesim`: no client-side rate limit, no leader election."""
    base = Settings(
        kubeconfig=str(kubesim.kubeconfig_path),
        qps=0,
        workers=2,
        leader_elect=False,
        metrics_address="127.0.0.1:0",
    )
    return dataclasses.replace(base, **overrides)


@contextlib.asynccontextmanager
async def running_operator(
    settings: Settings, *, start_within: float = 10.0
) -> AsyncIterator[manager.Manager]:
    """A started Manager with the MPIJob reconciler; stopped (and awaited) on exit."""
    mgr = manager.Manager(settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS)
    task = asyncio.create_task(mgr.run(), name="operator")
    try:
        started = asyncio.create_task(mgr.started.wait())
        done, _ = await asyncio.wait(
            {task, started}, timeout=start_within, return_when=asyncio.FIRST_COMPLETED
        )
        started.cancel()
        if task in done:
            task.result()
        assert mgr.started.is_set(), f"the operator did not start within {start_within:.0f}s"
        yield mgr
    finally:
        mgr.request_stop()
        await asyncio.wait_for(task, 15)


async def stop_process(proc: asyncio.subprocess.Process, grace: float = 15) -> None:
    """SIGTERM, `grace` seconds to exit, then SIGKILL; a process already gone is left as it is."""
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def operator_process(kubeconfig: Path, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`mpi-operator run` in its own process, as on a cluster, its output in `log`; stopped on exit."""
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mpi_operator", "run", "--kubeconfig", str(kubeconfig),
            "--no-leader-elect", "--metrics-address", "127.0.0.1:0",
            stdout=asyncio.subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
        try:
            yield proc
        finally:
            await stop_process(proc)


@contextlib.asynccontextmanager
async def sim_process(
    kubeconfig: Path, log: Path, *flags: str, start_within: float = 60
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`mpi-operator sim [flags]` in its own process, yielded once it has written `kubeconfig`.

    Its output goes on to `log` for the whole run (a pipe nobody drained would stall it once full).
    Stopped on exit unless the caller already ended it (killing it is how the cleanup tests start)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mpi_operator", "sim", "--kubeconfig-out", str(kubeconfig), *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    serving = asyncio.Event()
    head: list[bytes] = []

    async def copy() -> None:
        assert proc.stdout is not None
        with log.open("wb") as sink:
            while line := await proc.stdout.readline():
                sink.write(line)
                sink.flush()
                if not serving.is_set():
                    head.append(line)
                if line.startswith(b"export KUBECONFIG="):
                    serving.set()

    copier = asyncio.create_task(copy())
    try:
        ready = asyncio.create_task(serving.wait())
        await asyncio.wait({ready, copier}, timeout=start_within, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        assert serving.is_set(), f"mpi-operator sim did not start: {b''.join(head).decode()[-3000:]}"
        yield proc
    finally:
        await stop_process(proc, grace=10)
        await copier
