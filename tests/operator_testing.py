"""The real operator (manager + MPIJob reconciler, no leader election) run inside a test process.

Shared by the reconcile and elastic suites, the install checks, the examples and the docs tests, so
that every one of them drives the operator the same way `mpi-operator run` would. `SteppedClock`
lets a test move the operator's time forward (pacing, grace periods, timeouts) instead of waiting
for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from mpi_operator.flowcontrol import Clock
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.reconcile.reconciler import WATCH_SELECTORS, mpijob_reconciler_factory
from mpi_operator.runtime import manager
from mpi_operator.runtime.types import utc_now
from mpi_operator.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
CRD = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
TEST_AGENT = "rc-test"
"""The user agent of the tests' own client: kubesim's request record tells its requests from the
operator's (`mpi_operator.kube.client.DEFAULT_USER_AGENT`)."""
RETRY_BACKOFF = {"backoff_base_seconds": 0.05, "backoff_max_seconds": 1.0}
"""Work-queue retries for tests: a conflict or an injected fault is retried within a second, not
1000 s."""


def source_env() -> dict[str, str]:
    """The environment for a child `python` that runs this tree's code: its source roots first on
    PYTHONPATH, whichever checkout the virtualenv's editable install points at."""
    roots = [str(ROOT / root) for root in ("operator", "discovery", "sim")]
    inherited = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*roots, *([inherited] if inherited else [])]),
    }


def run_python(script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`script` run by a child `python -c` on this tree's code (`source_env`), its output
    captured."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=source_env(),
        check=False,
    )


def operator_settings(kubesim: KubeSim, **overrides: Any) -> Settings:
    """Settings for an operator talking to `kubesim`: no client-side rate limit, no leader
    election."""
    base = Settings(
        kubeconfig=str(kubesim.kubeconfig_path),
        qps=0,
        workers=2,
        leader_elect=False,
        metrics_address="127.0.0.1:0",
    )
    return dataclasses.replace(base, **overrides)


def quick_settings(kubesim: KubeSim, **overrides: Any) -> Settings:
    """`operator_settings` with the tests' short retry backoff (`RETRY_BACKOFF`)."""
    return operator_settings(kubesim, **{**RETRY_BACKOFF, **overrides})


def plain_mpijob(name: str, workers: int = 1, namespace: str = "default") -> dict[str, Any]:
    """A v2beta1 MPIJob of one launcher and `workers` workers running the pi image, nothing else."""
    template = {"spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": workers, "template": template},
            }
        },
    }


def fast_sim_settings(**overrides: Any) -> SimSettings:
    """kubesim for an operator test: pods Ready and Job back-offs in a tenth of a second, a bookmark
    every half second; `overrides` add a cluster shape, a volume sync, a node grace..."""
    fast: dict[str, Any] = {
        "start_seconds": 0.1,
        "ready_seconds": 0.1,
        "job_backoff_seconds": 0.1,
        "bookmark_seconds": 0.5,
    }
    return SimSettings(**(fast | overrides))


async def install_mpijob_crd(kube: Kube) -> None:
    """Creates the MPIJob CRD of `crds/` and waits until the API server serves it (Established)."""
    # Imported here: tests/conftest.py imports this module before it registers the kubesim.testing
    # plugin, which pytest must import first to rewrite its assertions.
    from kubesim.testing import eventually

    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    await kube.create(CRD, crd)

    async def established() -> bool:
        got = await kube.get(CRD, crd["metadata"]["name"])
        return any(
            c["type"] == "Established" for c in (got.get("status") or {}).get("conditions") or []
        )

    await eventually(established, what="the MPIJob CRD to be established")


@contextlib.asynccontextmanager
async def mpijob_client(kubesim: KubeSim) -> AsyncIterator[Kube]:
    """A client of `kubesim` with the user agent `TEST_AGENT` and the MPIJob CRD installed; closed
    on exit."""
    client = await Kube.from_kubeconfig(
        str(kubesim.kubeconfig_path), qps=0, burst=1, user_agent=TEST_AGENT
    )
    try:
        await install_mpijob_crd(client)
        yield client
    finally:
        await client.close()


class _SteppedTimer:
    __slots__ = ("callback", "clock", "deadline", "handle")

    def __init__(self, clock: SteppedClock, deadline: float, callback: Callable[[], None]) -> None:
        self.clock = clock
        self.deadline = deadline
        self.callback = callback
        self.handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        delay = max(self.deadline - self.clock.now(), 0.0)
        self.handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self.clock._timers.discard(self)
        self.callback()

    def cancel(self) -> None:
        self.clock._timers.discard(self)
        if self.handle is not None:
            self.handle.cancel()


class SteppedClock:
    """The operator's clock in a test: real time plus every jump the test made with `advance`.

    A `mpi_operator.flowcontrol.Clock` (for the manager's work queue, rate limiters and reflectors)
    and, through `utc_now`, the wall clock the reconciler stamps and paces with (`ManagerDeps.now`).
    Time keeps flowing, so retries and backoffs behave as in production; a pacing wait of minutes (a
    scale-in grace, a below-minReplicas timeout) passes the moment the test advances past it, and a
    test can tell from the clock which side of a deadline something happened on, however slow the
    machine. Timers run on the event loop they were created in.
    """

    def __init__(self) -> None:
        self._offset = 0.0
        self._timers: set[_SteppedTimer] = set()

    @property
    def offset(self) -> float:
        """Seconds this clock is ahead of real time."""
        return self._offset

    def now(self) -> float:
        return time.monotonic() + self._offset

    def utc_now(self) -> datetime:
        return utc_now() + timedelta(seconds=self._offset)

    def call_later(self, delay: float, callback: Callable[[], None]) -> _SteppedTimer:
        timer = _SteppedTimer(self, self.now() + max(delay, 0.0), callback)
        self._timers.add(timer)
        timer.arm()
        return timer

    async def sleep(self, delay: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self.call_later(delay, lambda: None if future.done() else future.set_result(None))
        try:
            await future
        finally:
            timer.cancel()

    def waits(self) -> list[float]:
        """Seconds until each pending timer (sleeps included) falls due, soonest first."""
        now = self.now()
        return sorted(timer.deadline - now for timer in self._timers)

    def advance(self, seconds: float) -> None:
        """Jumps `seconds` ahead; timers that fall due run on the loop's next iterations, earliest
        first."""
        assert seconds >= 0, "a clock only moves forward"
        self._offset += seconds
        for timer in sorted(self._timers, key=lambda t: t.deadline):
            timer.arm()


@contextlib.asynccontextmanager
async def running_operator(
    settings: Settings,
    *,
    start_within: float = 30.0,
    clock: Clock | None = None,
    now: Callable[[], datetime] = utc_now,
) -> AsyncIterator[manager.Manager]:
    """A started Manager with the MPIJob reconciler; stopped (and awaited) on exit. `clock` and
    `now` are the manager's (None: the real clock), e.g. a `SteppedClock` and its `utc_now`."""
    mgr = manager.Manager(
        settings, mpijob_reconciler_factory, selectors=WATCH_SELECTORS, clock=clock, now=now
    )
    task = asyncio.create_task(mgr.run(), name="operator")
    try:
        started = asyncio.create_task(mgr.started.wait())
        done, _ = await asyncio.wait(
            {task, started}, timeout=start_within, return_when=asyncio.FIRST_COMPLETED
        )
        started.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await started
        if task in done:
            task.result()
        assert mgr.started.is_set(), f"the operator did not start within {start_within:.0f}s"
        yield mgr
    finally:
        mgr.request_stop()
        await asyncio.wait_for(task, 30)


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
async def operator_process(
    kubeconfig: Path, log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`mpi-operator run` in its own process, as on a cluster, its output in `log`; stopped on
    exit."""
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
    Stopped on exit unless the caller already ended it (killing it is how the cleanup tests
    start)."""
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
        await asyncio.wait(
            {ready, copier}, timeout=start_within, return_when=asyncio.FIRST_COMPLETED
        )
        ready.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ready
        assert serving.is_set(), (
            f"mpi-operator sim did not start: {b''.join(head).decode()[-3000:]}"
        )
        yield proc
    finally:
        await stop_process(proc, grace=10)
        await copier
