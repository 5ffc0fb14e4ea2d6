"""A Horovod-like consumer: like `horovodrun`'s discovery thread it runs the launcher's mounted
`discover_hosts.sh` (fetched through kubesim's file endpoint and executed with `sh`) during a 2 -> 3
-> 1 sequence, and checks every answer: well-formed `host:slots` lines only, never an empty one, and
every listed host a worker pod that is Ready and not terminating at that moment. It reads again
after every change of the cluster rather than once a second as Horovod does, so it sees every state
Horovod could."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from chaoslib.invariants import is_ready
from chaoslib.steps import scale

from integration.reconcile.harness import wait_condition
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_discovery import hostfile
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock

from .harness import elastic_job, host, mounted_script, run_script, wait_mounted

GRACE = 600
"""scaleInGracePeriodSeconds, on the operator's `SteppedClock`: over when the test moves the
clock."""


async def consume(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, tmp: Path, seen: list[tuple[str, ...]]
) -> None:
    """Reads after every cluster change until cancelled; an AssertionError ends it (and the test)
    with what was wrong."""
    changed = asyncio.Event()

    def on_change(*_args: Any) -> None:
        changed.set()

    sim.cluster.add_listener(on_change)
    try:
        while True:
            changed.clear()
            await check_once(kube, sim, http, tmp, seen)
            await changed.wait()
    finally:
        sim.cluster.remove_listener(on_change)


async def check_once(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, tmp: Path, seen: list[tuple[str, ...]]
) -> None:
    script = await mounted_script(kube, sim, http, "hc")
    if script is None:
        return
    code, stdout, err = await run_script(script, tmp)
    assert code == 0, f"discover_hosts.sh exited {code}: {err}"
    assert all(line for line in stdout.splitlines()), f"an empty line in {stdout!r}"
    hosts = hostfile.parse_discovery_output(stdout)  # strict: ValueError on a malformed line
    items, _ = await kube.list(
        resources.POD, "default", label_selector="training.kubeflow.org/job-name=hc"
    )
    pods = {p["spec"].get("hostname"): p for p in items}
    for name in hosts:
        pod = pods.get(name.split(".", 1)[0])
        assert pod is not None, f"{name} listed without a pod"
        assert is_ready(pod), f"{name} listed while not Ready"
        assert not pod["metadata"].get("deletionTimestamp"), f"{name} listed while terminating"
    if not seen or seen[-1] != tuple(hosts):
        seen.append(tuple(hosts))


async def test_a_polling_consumer_never_sees_a_host_it_cannot_use(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
    tmp_path: Path,
) -> None:
    await kube.create(resources.MPIJOB, elastic_job("hc", workers=2, grace=GRACE))
    await wait_condition(kube, "hc", "Running")
    seen: list[tuple[str, ...]] = []
    consumer = asyncio.create_task(consume(kube, kubesim, http, tmp_path, seen))

    async def consumer_saw(count: int) -> bool:
        assert not consumer.done(), "the consumer stopped early"
        return bool(seen) and len(seen[-1]) == count

    try:
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", 0), host("hc", 1)])
        await eventually(lambda: consumer_saw(2), what="the consumer to read 2 hosts")
        await scale(kube, "hc", 3, "merge")
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", i) for i in range(3)])
        await eventually(lambda: consumer_saw(3), what="the consumer to read 3 hosts")
        await scale(kube, "hc", 1, "merge")
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", 0)])
        await eventually(lambda: consumer_saw(1), what="the consumer to read 1 host")
        clock.advance(GRACE)

        async def gone() -> bool:
            items, _ = await kube.list(
                resources.POD, "default", label_selector="training.kubeflow.org/job-role=worker"
            )
            return len(items) == 1

        await eventually(gone, what="the scaled-in workers deleted")
        await check_once(kube, kubesim, http, tmp_path, seen)  # the state after the deletion, too
        assert not consumer.done(), "the consumer stopped early"
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
    counts = [len(hosts) for hosts in seen]
    assert counts[-1] == 1, f"the consumer saw {seen}"
    assert {2, 3} <= set(counts), f"the consumer saw {seen}"


async def test_a_cancelled_read_leaves_no_sh_behind(tmp_path: Path) -> None:
    """The consumer is cancelled mid-read at the end of every run; its `sh` must be reaped then,
    not left to the garbage collector (whose ResourceWarning failed the next test's setup)."""
    pidfile = tmp_path / "pid"
    reader = asyncio.create_task(run_script(f"echo $$ > {pidfile}; exec sleep 600", tmp_path))

    async def started() -> bool:
        return pidfile.exists() and pidfile.read_text().strip().isdigit()

    await eventually(started, what="the script to start")
    pid = int(pidfile.read_text())
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
    with pytest.raises(ProcessLookupError):  # ended and reaped: not even a zombie
        os.kill(pid, 0)
