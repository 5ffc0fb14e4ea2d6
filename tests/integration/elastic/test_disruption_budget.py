"""The workers' PodDisruptionBudget on kubesim: an elastic job gets one at `minReplicas`, a spec
edit moves its floor, the job's deletion takes it away; the real `kubectl drain` takes the job down
to `minReplicas` and no further (429, `will retry after 5s`), and finishes once a replacement is
Ready.

kubectl's 5 s retry is real time, so the cluster runs on a real clock, 100 times faster than real
(the evicted pods' grace periods are short), as tests/integration/kubesim/test_drain.py does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.control import Control, RecordedRequest, observe_requests
from kubesim.nodes import NodeShape, uniform
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import fast_sim_settings

from ..reconcile.harness import list_names, mpijob
from .harness import NS, VOLUME_SYNC_SECONDS, elastic_job, get_job, worker_pods

GPU_NODE = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"}
GPU_WORKER = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
LAUNCHER_NODE = "cpu-1"


@pytest.fixture
def kubesim_settings() -> SimSettings:
    nodes = (*uniform(3, GPU_NODE), NodeShape(LAUNCHER_NODE, {"cpu": "16", "pods": "110"}))
    return fast_sim_settings(nodes=nodes, volume_sync_seconds=VOLUME_SYNC_SECONDS, time_scale=0.01)


def gpu_job(name: str = "pi", **kwargs: Any) -> dict[str, Any]:
    """3 one-GPU workers, one per GPU node; the launcher on the node no drain here touches."""
    body = elastic_job(name, workers=3, min_replicas=2, max_replicas=3, **kwargs)
    specs = body["spec"]["mpiReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["containers"] = [GPU_WORKER]
    specs["Launcher"]["template"]["spec"]["nodeSelector"] = {
        "kubernetes.io/hostname": LAUNCHER_NODE
    }
    return body


async def budget(kube: Kube, name: str = "pi-workers") -> dict[str, Any] | None:
    try:
        return await kube.get(resources.POD_DISRUPTION_BUDGET, name, NS)
    except errors.NotFound:
        return None


async def ready_workers(kube: Kube) -> dict[str, str]:
    """Ready worker pod -> its node."""
    return {
        name: pod["spec"]["nodeName"]
        for name, pod in (await worker_pods(kube, "pi")).items()
        if not pod["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod["status"].get("conditions", [])
        )
    }


async def test_the_budget_follows_the_spec_and_goes_with_the_job(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, gpu_job())
    made = await eventually(lambda: budget(kube), what="the PodDisruptionBudget")
    assert made["spec"]["minAvailable"] == 2
    assert made["metadata"]["ownerReferences"][0]["name"] == "pi"

    edit = {"spec": {"elasticPolicy": {"minReplicas": 1}}}
    await kube.patch(resources.MPIJOB, "pi", edit, namespace=NS)

    async def lowered() -> bool:
        return ((await budget(kube)) or {}).get("spec", {}).get("minAvailable") == 1

    await eventually(lowered, what="minAvailable 1")

    await kube.delete(resources.MPIJOB, "pi", namespace=NS)

    def collected() -> bool:
        return not kubesim.cluster.list(builtins.PDBS, NS)["items"]

    await eventually(collected, what="the budget garbage-collected with its job")


async def test_a_static_job_gets_one_only_when_it_asks(kube: Kube, operator: Manager) -> None:
    await kube.create(resources.MPIJOB, mpijob("plain", workers=2))
    await kube.create(resources.MPIJOB, mpijob("asks", workers=2, disruptionBudgetPolicy="Always"))
    made = await eventually(lambda: budget(kube, "asks-workers"), what="the opted-in budget")
    assert made["spec"]["minAvailable"] == 2

    async def plain_started() -> bool:
        return "plain-launcher" in await list_names(kube, resources.JOB)

    await eventually(plain_started, what="the static job's launcher")  # its budget came before
    assert await budget(kube, "plain-workers") is None


async def test_drain_stops_at_min_replicas(
    kubesim: KubeSim, kube: Kube, operator: Manager, kubectl: Kubectl
) -> None:
    await kube.create(resources.MPIJOB, gpu_job())

    async def three() -> dict[str, str] | None:
        ready = await ready_workers(kube)
        return ready if len(ready) == 3 else None

    placed = await eventually(three, what="3 Ready workers")
    await eventually(lambda: budget(kube), what="the PodDisruptionBudget")
    first, second = sorted(placed.values())[:2]

    # One worker may go: 3 Ready, 2 needed.
    rc, out, err = await kubectl(
        "drain", first, "--ignore-daemonsets", "--force", "--timeout=60s", limit=90
    )
    assert rc == 0, err
    assert f"node/{first} drained" in out

    async def down_to_two() -> bool:
        ready = await ready_workers(kube)
        return len(ready) == 2 and first not in ready.values()

    await eventually(down_to_two, what="2 Ready workers")

    refused: list[RecordedRequest] = []

    def on_request(_: Control, request: RecordedRequest) -> None:
        if request.subresource == "eviction":
            refused.append(request)

    stop = observe_requests(on_request)
    try:
        drain = asyncio.create_task(
            kubectl("drain", second, "--ignore-daemonsets", "--force", "--timeout=60s", limit=90)
        )
        # A refusal changes nothing in the cluster, so there is no change to wake on.
        await eventually(lambda: any(r.status == 429 for r in refused), what="a 429")
    finally:
        stop()
    # No further: the second node's worker still runs, and the job runs on at its minimum.
    assert second in (await ready_workers(kube)).values()
    job = await get_job(kube, "pi")
    assert not any(
        c["type"] == "Failed" and c["status"] == "True" for c in job["status"]["conditions"]
    )

    # Capacity returns: the lost worker's replacement is placed and Ready, so the drain goes on.
    rc, _, err = await kubectl("uncordon", first)
    assert rc == 0, err
    rc, out, err = await drain
    assert rc == 0, err
    assert "Cannot evict pod as it would violate the pod's disruption budget." in err, err
    assert f"node/{second} drained" in out
    ready = await eventually(lambda: ready_workers(kube), what="Ready workers")
    assert second not in ready.values()
