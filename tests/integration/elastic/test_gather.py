"""Workers that turn Ready a moment apart join discovery in one change: an addition waits for the
wanted workers already placed and starting (Running, not yet Ready), for at most half of
`settleSeconds`. The workers stay not Ready (`kubesim/ready: "false"`) until the test lets each one
go, so the order is the test's and a slow machine only makes the gathering window matter less."""

from __future__ import annotations

from typing import Any

from chaoslib.invariants import is_ready

from integration.reconcile.harness import NS, events_for, wait_event
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import elastic_job, host, worker_pods

SETTLE = 20
"""A window of 10 s: far longer than kubesim takes to make a worker Ready after the test's patch."""


async def ready(kube: Kube, name: str) -> None:
    patch = {"metadata": {"annotations": {"kubesim/ready": "true"}}}
    await kube.patch(resources.POD, name, patch, namespace=NS)

    async def is_now() -> bool:
        return is_ready(await kube.get(resources.POD, name, NS))

    await eventually(is_now, what=f"{name} Ready")


async def test_workers_ready_a_moment_apart_are_added_in_one_change(
    kube: Kube, operator: Manager
) -> None:
    body = elastic_job(
        "gather",
        workers=3,
        min_replicas=1,
        max_replicas=3,
        settle=SETTLE,
        worker_annotations={"kubesim/ready": "false"},
    )
    await kube.create(resources.MPIJOB, body)

    async def all_running() -> dict[str, dict[str, Any]] | None:
        pods = await worker_pods(kube, "gather")
        phases = [(p.get("status") or {}).get("phase") for p in pods.values()]
        return pods if phases == ["Running"] * 3 else None

    await eventually(all_running, what="three workers Running, none Ready")
    for i in range(3):
        await ready(kube, f"gather-worker-{i}")

    added = await wait_event(kube, "gather", "DiscoveryHostsAdded")
    # Without the gathering, worker-0 would have been listed alone as soon as it was Ready.
    assert all(host("gather", i) in added["message"] for i in range(3)), added["message"]
    assert added.get("count", 1) == 1
    reasons = [e["reason"] for e in await events_for(kube, "gather")]
    assert reasons.count("DiscoveryHostsAdded") == 1, reasons
