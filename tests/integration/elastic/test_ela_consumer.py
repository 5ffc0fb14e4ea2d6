"""A Horovod-like consumer: like `horovodrun`'s discovery thread it runs the launcher's mounted
`discover_hosts.sh` once a second (fetched through kubesim's file endpoint and executed with `sh`) during
a 2 -> 3 -> 1 sequence, and checks every answer: well-formed `host:slots` lines only, never an empty one,
and every listed host a worker pod that is Ready and not terminating at that moment."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiohttp
from ela_harness import (
    elastic_job,
    host,
    http,
    is_ready,
    kubesim_settings,
    mounted_script,
    scale,
    wait_mounted,
)

from integration.reconcile.rc_harness import eventually, kube, operator, wait_condition
from kubesim.app import KubeSim
from mpi_discovery import hostfile
from mpi_operator.controller.manager import Manager
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

__all__ = ["http", "kube", "kubesim_settings", "operator"]

POLL_SECONDS = 1.0
"""Horovod's discovery interval."""


async def run_script(script: str, tmp: Path) -> str:
    path = tmp / "discover_hosts.sh"
    path.write_text(script)
    proc = await asyncio.create_subprocess_exec(
        "sh", str(path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"discover_hosts.sh exited {proc.returncode}: {err.decode()}"
    return out.decode()


async def consume(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, tmp: Path, seen: list[tuple[str, ...]]
) -> None:
    """Polls until cancelled; an AssertionError ends it (and the test) with what was wrong."""
    while True:
        script = await mounted_script(kube, sim, http, "hc")
        if script is not None:
            stdout = await run_script(script, tmp)
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
        await asyncio.sleep(POLL_SECONDS)


async def test_a_polling_consumer_never_sees_a_host_it_cannot_use(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager, tmp_path: Path
) -> None:
    await kube.create(resources.MPIJOB, elastic_job("hc", workers=2, grace=2))
    await wait_condition(kube, "hc", "Running")
    seen: list[tuple[str, ...]] = []
    consumer = asyncio.create_task(consume(kube, kubesim, http, tmp_path, seen))
    try:
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", 0), host("hc", 1)])
        await asyncio.sleep(1.5 * POLL_SECONDS)  # let the consumer read this state
        await scale(kube, "hc", 3, "merge")
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", i) for i in range(3)])
        await asyncio.sleep(1.5 * POLL_SECONDS)
        await scale(kube, "hc", 1, "merge")
        await wait_mounted(kube, kubesim, http, "hc", [host("hc", 0)])

        async def gone() -> bool:
            items, _ = await kube.list(
                resources.POD, "default", label_selector="training.kubeflow.org/job-role=worker"
            )
            return len(items) == 1

        await eventually(gone, "the scaled-in workers deleted", limit=10)
        await asyncio.sleep(1.5 * POLL_SECONDS)
        assert not consumer.done(), "the consumer stopped early"
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
    counts = [len(hosts) for hosts in seen]
    assert counts[-1] == 1, f"the consumer saw {seen}"
    assert {2, 3} <= set(counts), f"the consumer saw {seen}"
