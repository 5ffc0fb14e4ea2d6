"""The real `kubectl drain` against a 3-node kubesim: it cordons the node, is refused by a
PodDisruptionBudget (429, `will retry after 5s`), finishes once the budget is relaxed, and the node
is uncordoned. kubectl's 5 s retry is real time, so the cluster runs on a real clock (100 times
faster than real, so the evicted pod's grace period is short) and the test waits one retry cycle."""

from __future__ import annotations

import asyncio
import json

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.control import Control, RecordedRequest, observe_requests
from kubesim.nodes import uniform
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually

pytestmark = pytest.mark.kubectl

ALLOCATABLE = {"cpu": "16", "memory": "64Gi", "pods": "110"}


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(nodes=uniform(3, ALLOCATABLE), time_scale=0.01)


def worker(name: str, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "w"}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
    }


def ready(sim: KubeSim, name: str) -> bool:
    pod = sim.cluster.get(builtins.PODS, "default", name)
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", [])
    )


async def test_drain_waits_for_the_budget_then_finishes(sim: KubeSim, kubectl: Kubectl) -> None:
    sim.cluster.create(builtins.PODS, "default", worker("a", "kubesim-1"))
    sim.cluster.create(builtins.PODS, "default", worker("b", "kubesim-2"))
    await eventually(lambda: ready(sim, "a") and ready(sim, "b"), what="pods Ready")
    rc, _, err = await kubectl("create", "pdb", "w", "--selector=app=w", "--min-available=2")
    assert rc == 0, err

    evictions: list[RecordedRequest] = []

    def on_request(_: Control, request: RecordedRequest) -> None:
        if request.subresource == "eviction":
            evictions.append(request)  # its status is filled in once answered

    stop = observe_requests(on_request)
    try:
        drain = asyncio.create_task(
            kubectl(
                "drain",
                "kubesim-1",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--force",
                "--timeout=60s",
                limit=90,
            )
        )
        # A refusal changes nothing in the cluster, so there is no change to wake on.
        await eventually(lambda: any(r.status == 429 for r in evictions), what="a 429")
    finally:
        stop()
    assert sim.cluster.get(builtins.NODES, None, "kubesim-1")["spec"]["unschedulable"] is True
    relax = json.dumps({"spec": {"minAvailable": 1}})
    rc, _, err = await kubectl("patch", "pdb", "w", "--type=merge", "-p", relax)
    assert rc == 0, err

    rc, out, err = await drain
    assert rc == 0, err
    assert (
        'error when evicting pods/"a" -n "default" (will retry after 5s): Cannot evict pod as it'
        " would violate the pod's disruption budget." in err
    )
    assert "pod/a evicted" in out
    assert "node/kubesim-1 drained" in out
    names = [p["metadata"]["name"] for p in sim.cluster.list(builtins.PODS, "default")["items"]]
    assert names == ["b"]

    rc, out, err = await kubectl("uncordon", "kubesim-1")
    assert (rc, out.strip()) == (0, "node/kubesim-1 uncordoned"), err
