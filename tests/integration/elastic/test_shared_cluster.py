"""Elastic jobs on a cluster with limits: a job starts at minReplicas while the rest of its workers
are Pending, the Pending ones join Horovod's world once scheduled and Ready, and the script never
lists a worker that is not Ready. Two nodes of two GPUs; a blocker pod holds one node's GPUs until
the test frees them."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from chaoslib.invariants import is_ready

from integration.reconcile.harness import NS, container, get_job, settle
from kubesim.app import KubeSim
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import fast_sim_settings

from .harness import (
    VOLUME_SYNC_SECONDS,
    elastic_job,
    host,
    mounted_hosts,
    wait_mounted,
    worker_pods,
)

GPU = "nvidia.com/gpu"
NODES = tuple(
    NodeShape(f"kubesim-{i}", {"cpu": "16", "memory": "64Gi", GPU: "2", "pods": "110"})
    for i in (1, 2)
)


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_sim_settings(volume_sync_seconds=VOLUME_SYNC_SECONDS, nodes=NODES)


def gpu_job(name: str, *, workers: int, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """An elastic job whose workers take one GPU each; the launcher waits for Ready workers."""
    one_gpu = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    return elastic_job(
        name,
        workers=workers,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        worker_container=container(resources=one_gpu),
        launcherCreationPolicy="WaitForWorkersReady",
    )


def blocker(gpus: int) -> dict[str, Any]:
    """A pod of another tenant holding `gpus` GPUs."""
    quantity = {GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker", "namespace": NS},
        "spec": {
            "containers": [container(resources={"requests": quantity, "limits": quantity})],
        },
    }


async def test_an_elastic_job_starts_at_min_replicas_and_grows_into_freed_gpus(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager
) -> None:
    await kube.create(resources.POD, blocker(2))

    async def blocker_bound() -> bool:
        return bool((await kube.get(resources.POD, "blocker", NS))["spec"].get("nodeName"))

    await eventually(blocker_bound, what="the blocker pod bound")
    await kube.create(resources.MPIJOB, gpu_job("fit", workers=4, min_replicas=2, max_replicas=4))

    async def two_ready_two_pending() -> list[str]:
        pods = await worker_pods(kube, "fit")
        ready = sorted(name for name, p in pods.items() if is_ready(p))
        pending = [p for p in pods.values() if not p["spec"].get("nodeName")]
        assert (len(pods), len(ready), len(pending)) == (4, 2, 2), sorted(pods)
        return ready

    ready = await eventually(two_ready_two_pending, what="two Ready workers and two Pending")
    indexes = sorted(int(name.rsplit("-", 1)[1]) for name in ready)
    # The launcher starts at minReplicas; its script lists the Ready workers only.
    await wait_mounted(kube, kubesim, http, "fit", [host("fit", i) for i in indexes])
    await settle(kube, operator, "fit")
    assert [h for h, _ in await mounted_hosts(kube, kubesim, http, "fit") or []] == [
        host("fit", i) for i in indexes
    ]
    elastic = (await get_job(kube, "fit"))["status"]["elastic"]
    assert (elastic["desired"], elastic["ready"], elastic["discovered"]) == (4, 2, 2)

    await kube.delete(resources.POD, "blocker", namespace=NS)
    await wait_mounted(kube, kubesim, http, "fit", [host("fit", i) for i in range(4)])
    pods = await worker_pods(kube, "fit")
    assert all(is_ready(p) for p in pods.values())
    elastic = (await get_job(kube, "fit"))["status"]["elastic"]
    assert (elastic["ready"], elastic["discovered"], elastic["replacements"]) == (4, 4, 0)
