"""Disruption is not failure, side by side with static jobs: for each way a cluster takes a worker
(preemption, the taint manager, the Eviction API, the kubelet's node-pressure eviction, its node
dying), an elastic job replaces it under a fresh host name without using `maxReplacements` and
keeps running, while a static job keeps upstream's semantics: the kubelet's eviction fails it
(`MPIJobEvicted`), any other loss recreates the worker under the same name and host name.

Three nodes with room for one worker each (the launcher shares the first); the worker on the third
node is the one taken. Workers tolerate an unreachable node for 0 s, so a dead node's pods go to
the taint manager as soon as kubesim's node lifecycle controller notices, on a short grace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from chaoslib.invariants import is_ready

from integration.reconcile.harness import (
    NS,
    conditions,
    container,
    events_for,
    get_job,
    mpijob,
    settle,
    wait_condition,
)
from kubesim.app import KubeSim
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.elastic.replacement import STUCK_SECONDS
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock, fast_sim_settings

from .harness import VOLUME_SYNC_SECONDS, elastic_job, host, wait_mounted, worker_pods

NODES = tuple(
    NodeShape(f"kubesim-{i}", {"cpu": "4", "memory": "16Gi", "pods": "110"}) for i in (1, 2, 3)
)
TAKEN_NODE = "kubesim-3"
GRACE = 600
"""The workers' termination grace period, and how long the simulated ones take to stop."""
JOB = "dis"


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_sim_settings(
        volume_sync_seconds=VOLUME_SYNC_SECONDS, node_monitor_grace_seconds=0.2, nodes=NODES
    )


def with_placement(body: dict[str, Any], unreachable_seconds: int = 0) -> dict[str, Any]:
    """One worker per node (3 of 4 cpus), low priority, gone from an unreachable node at once; the
    launcher on the first node."""
    specs = body["spec"]["mpiReplicaSpecs"]
    worker = specs["Worker"]["template"]["spec"]
    three = {"cpu": "3"}
    worker["containers"] = [container(resources={"requests": three, "limits": three})]
    worker["priorityClassName"] = "low"
    worker["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": unreachable_seconds,
        }
    ]
    # A deleted worker stays Terminating until the test ends it (`capacity_returns`), so the
    # operator sees why it went whatever its load.
    worker["terminationGracePeriodSeconds"] = GRACE
    annotations = specs["Worker"]["template"]["metadata"]["annotations"]
    annotations["kubesim/termination-seconds"] = str(GRACE)
    launcher = specs["Launcher"]["template"]["spec"]
    launcher["nodeSelector"] = {"kubernetes.io/hostname": "kubesim-1"}
    return body


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> None:
    async with http.post(url, json=body) as response:
        assert response.status in (200, 201), await response.text()


async def create_priority_classes(sim: KubeSim, http: aiohttp.ClientSession) -> None:
    for name, value in (("low", 1), ("high", 1000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await post(http, f"{sim.url}/apis/scheduling.k8s.io/v1/priorityclasses", body)


Disrupt = Callable[[KubeSim, aiohttp.ClientSession, str], Awaitable[None]]


async def preempt(sim: KubeSim, http: aiohttp.ClientSession, _pod: str) -> None:
    three = {"cpu": "3"}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "urgent", "namespace": NS},
        "spec": {
            "priorityClassName": "high",
            "nodeSelector": {"kubernetes.io/hostname": TAKEN_NODE},
            "containers": [container(resources={"requests": three, "limits": three})],
        },
    }
    await post(http, f"{sim.url}/api/v1/namespaces/{NS}/pods", body)


async def taint(sim: KubeSim, http: aiohttp.ClientSession, _pod: str) -> None:
    await set_taints(sim, http, [{"key": "maintenance", "effect": "NoExecute"}])


async def set_taints(
    sim: KubeSim, http: aiohttp.ClientSession, taints: list[dict[str, str]] | None
) -> None:
    patch = {"spec": {"taints": taints}}
    async with http.patch(
        f"{sim.url}/api/v1/nodes/{TAKEN_NODE}",
        json=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    ) as response:
        assert response.status == 200, await response.text()


async def evict_api(sim: KubeSim, http: aiohttp.ClientSession, pod: str) -> None:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NS},
    }
    await post(http, f"{sim.url}/api/v1/namespaces/{NS}/pods/{pod}/eviction", body)


async def kubelet_evict(sim: KubeSim, _http: aiohttp.ClientSession, pod: str) -> None:
    sim.controllers.kubelet.evict(NS, pod)


async def node_dies(sim: KubeSim, _http: aiohttp.ClientSession, _pod: str) -> None:
    sim.controllers.kubelet.node_down(TAKEN_NODE)


async def node_reboots(sim: KubeSim, http: aiohttp.ClientSession, pod: str) -> None:
    """The node goes down and comes back before the taint manager acts: the kubelet reports the
    container that died with it as ended, exit code 255, reason Unknown."""
    sim.controllers.kubelet.node_down(TAKEN_NODE)

    async def unready() -> bool:
        async with http.get(f"{sim.url}/api/v1/namespaces/{NS}/pods/{pod}") as response:
            return not is_ready(await response.json())

    await eventually(unready, what=f"{pod} not Ready on its silent node")
    sim.controllers.kubelet.node_up(TAKEN_NODE)


STAYS = ("kubelet-eviction", "node-reboots")
"""The cases whose pod ends Failed instead of being deleted."""

CASES: dict[str, tuple[Disrupt, str]] = {
    "preemption": (preempt, "PreemptionByScheduler"),
    "taint-manager": (taint, "DeletionByTaintManager"),
    "eviction-api": (evict_api, "EvictionByEvictionAPI"),
    "kubelet-eviction": (kubelet_evict, "TerminationByKubelet"),
    "node-reboots": (node_reboots, "Unknown"),
    "node-dies": (node_dies, "DeletionByTaintManager"),
}


async def started(kube: Kube, body: dict[str, Any], case: str) -> tuple[int, str, str]:
    """Creates the job and waits for three Ready workers: `(index, pod, uid)` of the one on the
    node to be taken."""
    await kube.create(resources.MPIJOB, with_placement(body, 3600 if case == "node-reboots" else 0))
    await wait_condition(kube, JOB, "Running")

    async def placed() -> tuple[int, str, str]:
        pods = await worker_pods(kube, JOB)
        assert len(pods) == 3, sorted(pods)
        assert all(is_ready(p) for p in pods.values()), "not all Ready"
        (name,) = [n for n, p in pods.items() if p["spec"].get("nodeName") == TAKEN_NODE]
        return int(name.rsplit("-", 1)[1]), name, pods[name]["metadata"]["uid"]

    return await eventually(placed, what="three Ready workers, one per node")


async def capacity_returns(
    sim: KubeSim,
    http: aiohttp.ClientSession,
    kube: Kube,
    case: str,
    pod: str,
    uid: str,
    clock: SteppedClock | None = None,
) -> None:
    """The taken pod finishes terminating, then what took it goes away: the preemptor ends (after
    the worker's replacement waited Pending for it), the taint is removed, the node is back. A pod
    deleted on a dead node stays Terminating until its kubelet returns; given the operator's
    `clock`, its deadline passes first and the elastic operator force-deletes it, so the
    replacement waits Pending for room instead."""
    if case not in STAYS:

        async def terminating() -> bool:
            old = (await worker_pods(kube, JOB)).get(pod)
            assert old is not None, f"{pod} gone already"
            return bool(old["metadata"].get("deletionTimestamp"))

        await eventually(terminating, what=f"{pod} terminating")
    if case == "node-dies" and clock is not None:
        clock.advance(GRACE + STUCK_SECONDS)
        await eventually(
            lambda: pending_successor(kube, pod, uid),
            what=f"{pod} force-deleted, its successor Pending",
        )
    if case == "node-dies":
        sim.controllers.kubelet.node_up(TAKEN_NODE)
    elif case not in STAYS:
        await kube.delete(resources.POD, pod, namespace=NS, uid=uid, grace_period_seconds=0)
    if case == "preemption":

        async def waits_for_room() -> bool:
            urgent = await kube.get(resources.POD, "urgent", NS)
            return bool(urgent["spec"].get("nodeName")) and await pending_successor(kube, pod, uid)

        await eventually(waits_for_room, what=f"the preemptor bound, {pod} Pending")
        await kube.delete(resources.POD, "urgent", namespace=NS)
    elif case == "taint-manager":
        await set_taints(sim, http, None)


async def pending_successor(kube: Kube, pod: str, uid: str) -> bool:
    new = (await worker_pods(kube, JOB)).get(pod)
    return new is not None and new["metadata"]["uid"] != uid and not new["spec"].get("nodeName")


@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_elastic_job_replaces_a_disrupted_worker_under_a_fresh_host_name(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
    case: str,
) -> None:
    disrupt, reason = CASES[case]
    await create_priority_classes(kubesim, http)
    body = elastic_job(JOB, workers=3, min_replicas=1, max_replicas=3)
    body["spec"]["elasticPolicy"]["maxReplacements"] = 0
    index, pod, uid = await started(kube, body, case)
    await wait_mounted(kube, kubesim, http, JOB, [host(JOB, i) for i in range(3)])

    await disrupt(kubesim, http, pod)
    # Out of Horovod's world at once, the job still running on the other two.
    await wait_mounted(kube, kubesim, http, JOB, [host(JOB, i) for i in range(3) if i != index])
    event = await _event(kube, "WorkerDisrupted")
    assert f"({reason})" in event["message"], event["message"]
    assert f"replacing it as host {host(JOB, index, 1)}" in event["message"]

    await capacity_returns(kubesim, http, kube, case, pod, uid, clock)

    async def replaced() -> bool:
        new = (await worker_pods(kube, JOB)).get(pod)
        assert new is not None, "no replacement yet"
        assert new["metadata"]["uid"] != uid, "the old pod is still there"
        assert new["spec"]["hostname"] == f"{pod}-r1"
        return is_ready(new)

    await eventually(replaced, what=f"a Ready replacement of {pod} as {pod}-r1")
    await wait_mounted(kube, kubesim, http, JOB, [host(JOB, i, int(i == index)) for i in range(3)])
    job = await get_job(kube, JOB)
    assert "Failed" not in conditions(job)
    elastic = job["status"]["elastic"]
    assert (elastic["replacements"], elastic["disruptions"]) == (0, 1)
    (loss,) = elastic["losses"]
    assert (loss["pod"], loss["host"], loss["kind"], loss["reason"]) == (
        pod,
        pod,
        "Disruption",
        reason,
    )
    assert not [e for e in await events_for(kube, JOB) if e["reason"] == "WorkerFailed"]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_static_job_keeps_upstream_semantics(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager, case: str
) -> None:
    disrupt, _ = CASES[case]
    await create_priority_classes(kubesim, http)
    _, pod, uid = await started(kube, mpijob(JOB, workers=3), case)

    await disrupt(kubesim, http, pod)
    if case == "node-reboots":

        async def failed() -> dict[str, Any]:
            old = (await worker_pods(kube, JOB))[pod]
            assert old["metadata"]["uid"] == uid
            assert old["status"].get("phase") == "Failed", "not Failed yet"
            return old

        ended = (await eventually(failed, what=f"{pod} Failed"))["status"]["containerStatuses"]
        assert ended[0]["state"]["terminated"]["reason"] == "Unknown"
        await settle(kube, operator, JOB)
        assert (await worker_pods(kube, JOB))[pod]["metadata"]["uid"] == uid, "left, as upstream"
        assert "Failed" not in conditions(await get_job(kube, JOB)), "the launcher's to decide"
        return
    if case == "kubelet-eviction":
        job = await wait_condition(kube, JOB, "Failed")
        assert conditions(job)["Failed"]["reason"] == "MPIJobEvicted"
        pods = await worker_pods(kube, JOB)
        assert pods[pod]["metadata"]["uid"] == uid, "an evicted worker stays, as upstream"
        return

    await capacity_returns(kubesim, http, kube, case, pod, uid)

    async def recreated() -> bool:
        new = (await worker_pods(kube, JOB)).get(pod)
        assert new is not None, "not recreated yet"
        assert new["metadata"]["uid"] != uid, "the old pod is still there"
        assert new["spec"]["hostname"] == pod, "upstream reuses the host name"
        return is_ready(new)

    await eventually(recreated, what=f"{pod} recreated under the same name")
    job = await get_job(kube, JOB)
    assert "Failed" not in conditions(job)
    assert "elastic" not in job["status"]


async def _event(kube: Kube, reason: str) -> dict[str, Any]:
    async def found() -> dict[str, Any]:
        matching = [e for e in await events_for(kube, JOB) if e["reason"] == reason]
        assert matching, f"no {reason} event yet"
        return matching[0]

    return await eventually(found, what=f"a {reason} event")
