"""Elastic scaling 2 -> 3 -> 1 -> 3 through every path a user has, seen from inside the launcher.

Each step is made through a different path (merge patch, JSON patch, the scale subresource), and
each is checked where Horovod looks: the launcher pod's *mounted* `discover_hosts.sh`, read through
kubesim's file endpoint. The kubelet's periodic volume sync never comes within the test, so a file
that changes shows the operator's launcher touch (recorded too). The scale-in grace is ten minutes
on the operator's `SteppedClock`: scaled-in pods outlive it until the test moves the clock past it,
and each deletion's time on that clock shows it came no earlier than the grace.
"""

from __future__ import annotations

from datetime import timedelta

import aiohttp
from chaoslib.invariants import is_ready
from chaoslib.steps import scale

from integration.reconcile.harness import OPERATOR_AGENT, get_job, quiet, settle, wait_condition
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock

from .harness import (
    Terminations,
    draining_since,
    elastic_job,
    elastic_status,
    host,
    launcher_pod,
    wait_mounted,
    worker_pods,
)

GRACE = 600
"""scaleInGracePeriodSeconds: far beyond the test's own duration, so only the clock's jump ends
it."""


def launcher_touches(kubesim: KubeSim, launcher: str) -> int:
    """The operator's patches of the launcher pod (what makes the kubelet refresh its volumes
    now)."""
    return sum(
        1
        for r in kubesim.control.recorded(user_agent=OPERATOR_AGENT)
        if (r.verb, r.resource, r.name) == ("patch", "pods", launcher)
    )


async def test_scale_out_in_out_through_every_path(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
) -> None:
    await kube.create(resources.MPIJOB, elastic_job("el", workers=2, grace=GRACE))
    await wait_condition(kube, "el", "Running")
    await wait_mounted(kube, kubesim, http, "el", [host("el", 0), host("el", 1)])
    launcher = await launcher_pod(kube, "el")
    assert launcher is not None
    touches = launcher_touches(kubesim, launcher["metadata"]["name"])

    # 2 -> 3 by merge patch: the new worker enters the mounted script once Ready, through a touch.
    await scale(kube, "el", 3, "merge")
    await wait_mounted(kube, kubesim, http, "el", [host("el", i) for i in range(3)])
    assert is_ready((await worker_pods(kube, "el"))["el-worker-2"])
    assert launcher_touches(kubesim, launcher["metadata"]["name"]) > touches

    # 3 -> 1 by JSON patch: hosts leave discovery at once, highest index first; pods wait for the
    # grace.
    with Terminations(kubesim, clock, "el") as terminations:
        await scale(kube, "el", 1, "json")
        await wait_mounted(kube, kubesim, http, "el", [host("el", 0)])
        await settle(kube, operator, "el")
        pods = await worker_pods(kube, "el")
        assert {"el-worker-1", "el-worker-2"} <= set(pods), (
            "scaled-in pods must outlive the grace period"
        )
        assert all(not p["metadata"].get("deletionTimestamp") for p in pods.values())
        stamps = {name: draining_since(pods[name]) for name in ("el-worker-1", "el-worker-2")}
        assert all(stamps.values()), f"drain stamps {stamps}"

        clock.advance(GRACE / 2)  # half-way: a look at the job must leave the draining pods alone
        await settle(kube, operator, "el")
        assert terminations.at == {}, "deleted half-way through scaleInGracePeriodSeconds"

        clock.advance(GRACE / 2)

        async def drained() -> bool:
            assert set(await worker_pods(kube, "el")) == {"el-worker-0"}
            return True

        await eventually(drained, what="the scaled-in pods deleted after their grace")
    for name, stamp in stamps.items():
        assert stamp is not None
        assert terminations.at[name] - stamp >= timedelta(seconds=GRACE), (
            f"{name} deleted before its grace"
        )
    assert (await elastic_status(kube, "el"))["discovered"] == 1

    # 1 -> 3 by the scale subresource: retired identities come back under fresh host names.
    await scale(kube, "el", 3, "scale")
    want = [host("el", 0), host("el", 1, 1), host("el", 2, 1)]
    await wait_mounted(kube, kubesim, http, "el", want)
    pods = await worker_pods(kube, "el")
    assert pods["el-worker-1"]["spec"]["hostname"] == "el-worker-1-r1"

    async def status_settled() -> bool:
        job = await get_job(kube, "el")
        elastic = job["status"].get("elastic") or {}
        assert (elastic.get("discovered"), elastic.get("desired")) == (3, 3), elastic
        assert job["status"]["observedGeneration"] == job["metadata"]["generation"]
        # What the scale subresource (and an HPA) reads: statusReplicasPath and labelSelectorPath.
        worker = job["status"]["replicaStatuses"]["Worker"]
        assert worker.get("active") == 3, worker
        assert worker.get("selector"), worker
        return True

    await eventually(
        status_settled, what="status: 3 desired and discovered at the latest generation"
    )
    assert await quiet(kubesim, kube, operator, "el") == [], (
        "a converged elastic job writes nothing"
    )
    registry = operator.metrics.registry
    # Published changes: the first hosts, then 3, 1 and 3 hosts; one timed convergence per scale.
    assert (registry.get_sample_value("mpi_operator_elastic_discovery_updates_total") or 0) >= 4
    assert (registry.get_sample_value("mpi_operator_elastic_convergence_seconds_count") or 0) >= 3
