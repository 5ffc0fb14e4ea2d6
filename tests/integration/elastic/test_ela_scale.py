"""Elastic scaling 2 -> 3 -> 1 -> 3 through every path a user has, seen from inside the launcher.

Each step is made through a different path (merge patch, JSON patch, the scale subresource), and each
is checked where Horovod looks: the launcher pod's *mounted* `discover_hosts.sh`, read through kubesim's
file endpoint, with the kubelet's volume sync at 60 s, so only the operator's launcher touch can make the
file change within the two seconds asserted here.
"""

from __future__ import annotations

import time

import aiohttp
from ela_harness import (
    VOLUME_SYNC_SECONDS,
    elastic_job,
    elastic_status,
    host,
    http,
    is_ready,
    kubesim_settings,
    scale,
    wait_mounted,
    worker_pods,
)

from integration.reconcile.rc_harness import eventually, get_job, kube, operator, quiet, wait_condition
from kubesim.app import KubeSim
from mpi_operator.controller.manager import Manager
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

__all__ = ["http", "kube", "kubesim_settings", "operator"]

PROPAGATION_LIMIT = 2.0
"""Worker Ready -> listed in the launcher's mounted script, at most (the volume sync is 60 s)."""


async def ready_at(kube: Kube, job: str, pod: str) -> float:
    """Waits for worker pod `pod` to be Ready; returns when it was first seen Ready."""

    async def check() -> bool:
        got = (await worker_pods(kube, job)).get(pod)
        return got is not None and is_ready(got)

    await eventually(check, f"worker pod {pod} Ready", interval=0.02)
    return time.monotonic()


async def test_scale_out_in_out_through_every_path(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager
) -> None:
    assert VOLUME_SYNC_SECONDS >= 30 * PROPAGATION_LIMIT
    await kube.create(resources.MPIJOB, elastic_job("el", workers=2, grace=2))
    await wait_condition(kube, "el", "Running")
    await wait_mounted(kube, kubesim, http, "el", [host("el", 0), host("el", 1)])

    # 2 -> 3 by merge patch: the new worker enters the mounted script within seconds of being Ready.
    await scale(kube, "el", 3, "merge")
    ready = await ready_at(kube, "el", "el-worker-2")
    listed = await wait_mounted(kube, kubesim, http, "el", [host("el", i) for i in range(3)], limit=5)
    assert listed - ready < PROPAGATION_LIMIT, f"took {listed - ready:.2f}s after Ready"

    # 3 -> 1 by JSON patch: hosts leave discovery at once, highest index first; pods wait for the grace.
    scaled_in = time.monotonic()
    await scale(kube, "el", 1, "json")
    await wait_mounted(kube, kubesim, http, "el", [host("el", 0)], limit=5)
    assert time.monotonic() - scaled_in < PROPAGATION_LIMIT + 1
    pods = await worker_pods(kube, "el")
    assert {"el-worker-1", "el-worker-2"} <= set(pods), "scaled-in pods must outlive the grace period"
    assert all(not p["metadata"].get("deletionTimestamp") for p in pods.values())

    async def drained() -> bool:
        assert set(await worker_pods(kube, "el")) == {"el-worker-0"}
        return True

    await eventually(drained, "the scaled-in pods deleted after their grace", limit=10)
    assert time.monotonic() - scaled_in >= 2, "deleted before scaleInGracePeriodSeconds"
    assert (await elastic_status(kube, "el"))["discovered"] == 1

    # 1 -> 3 by the scale subresource: retired identities come back under fresh host names.
    await scale(kube, "el", 3, "scale")
    want = [host("el", 0), host("el", 1, 1), host("el", 2, 1)]
    await wait_mounted(kube, kubesim, http, "el", want, limit=10)
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

    await eventually(status_settled, "status: 3 desired and discovered at the latest generation")
    assert await quiet(kubesim, 1.5) == [], "a converged elastic job writes nothing"
    registry = operator.metrics.registry
    # Published changes: the first hosts, then 3, 1 and 3 hosts; one timed convergence per scale.
    assert (registry.get_sample_value("mpi_operator_elastic_discovery_updates_total") or 0) >= 4
    assert (registry.get_sample_value("mpi_operator_elastic_convergence_seconds_count") or 0) >= 3
