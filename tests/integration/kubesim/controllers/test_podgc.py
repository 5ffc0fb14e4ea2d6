"""The pod garbage collector on the fake clock: a deleted node's pods are marked Failed with
`DisruptionTarget` (DeletionByPodGC) and force-deleted after the 40 s quarantine, and not before; a
node that appears within the quarantine keeps its pods; a pod Terminating on a dead node goes once
the node is tainted out-of-service; past the threshold the oldest finished pods go, evicted
first."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import EventType
from kubesim.controllers.kubelet import Kubelet
from kubesim.nodes import NodeShape
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings

SHAPES = (
    NodeShape("kubesim-1", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
    NodeShape("kubesim-2", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
)
QUARANTINE = 40.0
THRESHOLD = 3


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(
        clock=clock,
        nodes=SHAPES,
        node_monitor_grace_seconds=40.0,
        terminated_pod_gc_threshold=THRESHOLD,
    )


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


def make_pod(
    sim: KubeSim, name: str, node: str, annotations: dict[str, str] | None = None, **spec: Any
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}], **spec},
    }
    sim.cluster.create(builtins.PODS, "default", body)


def names(sim: KubeSim) -> set[str]:
    return {p["metadata"]["name"] for p in sim.cluster.list(builtins.PODS, "default")["items"]}


class LastWords:
    """Each pod's status as it was last written before its deletion."""

    def __init__(self, sim: KubeSim) -> None:
        self.status: dict[str, dict[str, Any]] = {}
        sim.cluster.add_listener(self._changed)

    def _changed(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and event == "DELETED":
            self.status[obj["metadata"]["name"]] = obj.get("status") or {}

    def disruption(self, name: str) -> tuple[str, str, str] | None:
        conditions = self.status[name].get("conditions") or []
        found = [c for c in conditions if c["type"] == "DisruptionTarget"]
        return (found[0]["status"], found[0]["reason"], found[0]["message"]) if found else None


async def test_a_deleted_nodes_pods_fail_and_go_after_the_quarantine(
    sim: KubeSim, clock: FakeClock
) -> None:
    words = LastWords(sim)
    make_pod(sim, "gone-with-node", "kubesim-1", terminationGracePeriodSeconds=30)
    make_pod(sim, "elsewhere", "kubesim-2")
    await clock.advance(2.0)
    sim.cluster.delete(builtins.NODES, None, "kubesim-1")
    await clock.advance(QUARANTINE - 1)
    assert names(sim) == {"gone-with-node", "elsewhere"}

    await clock.advance(1)
    assert names(sim) == {"elsewhere"}  # grace 0: no kubelet was there to confirm
    assert words.status["gone-with-node"]["phase"] == "Failed"
    assert words.disruption("gone-with-node") == (
        "True",
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )


async def test_a_node_that_comes_within_the_quarantine_keeps_its_pods(
    sim: KubeSim, clock: FakeClock
) -> None:
    make_pod(sim, "early", "kubesim-3")
    await clock.advance(QUARANTINE / 2)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kubesim-3"}}
    sim.cluster.create(builtins.NODES, None, node)
    await clock.advance(QUARANTINE)
    assert "early" in names(sim)


async def test_a_pod_bound_to_a_node_that_never_comes_is_collected(
    sim: KubeSim, clock: FakeClock
) -> None:
    words = LastWords(sim)
    make_pod(sim, "typo", "kubesim-9")
    await clock.advance(QUARANTINE + 1)
    assert "typo" not in names(sim)
    assert words.status["typo"]["phase"] == "Failed"


async def test_a_pod_terminating_on_a_dead_node_goes_once_it_is_out_of_service(
    sim: KubeSim, clock: FakeClock
) -> None:
    words = LastWords(sim)
    make_pod(sim, "stuck", "kubesim-1", terminationGracePeriodSeconds=30)
    make_pod(sim, "tolerant", "kubesim-1", tolerations=[{"operator": "Exists"}])
    await clock.advance(2.0)
    kubelet(sim).node_down("kubesim-1")
    await clock.advance(41)  # the node is NotReady (Unknown) now
    sim.cluster.delete(builtins.PODS, "default", "stuck")
    await clock.advance(600)
    assert "stuck" in names(sim)  # no kubelet confirms: Terminating, as on a real cluster

    node = sim.cluster.get(builtins.NODES, None, "kubesim-1")
    out = {"key": "node.kubernetes.io/out-of-service", "value": "shutdown", "effect": "NoExecute"}
    spec = {**node["spec"], "taints": [*(node["spec"].get("taints") or []), out]}
    sim.cluster.update(builtins.NODES, None, "kubesim-1", {**node, "spec": spec})
    await clock.advance(1)
    assert "stuck" not in names(sim)
    assert words.status["stuck"]["phase"] == "Failed"
    assert "tolerant" in names(sim)  # not being deleted: PodGC leaves it to the taint manager


async def test_out_of_service_on_a_ready_node_collects_nothing(
    sim: KubeSim, clock: FakeClock
) -> None:
    slow = {"kubesim/termination-seconds": "20"}
    make_pod(sim, "fine", "kubesim-1", slow, terminationGracePeriodSeconds=30)
    await clock.advance(2.0)
    node = sim.cluster.get(builtins.NODES, None, "kubesim-1")
    taint = {"key": "node.kubernetes.io/out-of-service", "effect": "NoSchedule"}
    sim.cluster.update(builtins.NODES, None, "kubesim-1", {**node, "spec": {"taints": [taint]}})
    sim.cluster.delete(builtins.PODS, "default", "fine")
    await clock.advance(5)
    assert "fine" in names(sim)  # its kubelet is alive: the container takes 20 s to stop
    await clock.advance(20)
    assert "fine" not in names(sim)


async def test_past_the_threshold_the_oldest_finished_pods_go_evicted_first(
    sim: KubeSim, clock: FakeClock
) -> None:
    done = {"kubesim/run-seconds": "1", "kubesim/exit-code": "0"}
    for i in range(THRESHOLD + 2):
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"done-{i}", "namespace": "default", "annotations": done},
            "spec": {
                "nodeName": "kubesim-2",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "x"}],
            },
        }
        sim.cluster.create(builtins.PODS, "default", body)
        await clock.advance(1.5)
    make_pod(sim, "evicted", "kubesim-1", restartPolicy="Never")
    await clock.advance(2.0)
    kubelet(sim).evict("default", "evicted", "The node was low on resource: memory.")
    await clock.advance(60)
    items = sim.cluster.list(builtins.PODS, "default")["items"]
    phases = {p["metadata"]["name"]: p["status"].get("phase") for p in items}
    # Without "evicted first", done-2 (older than the evicted pod) would have gone instead.
    assert set(phases) == {"done-2", "done-3", "done-4"}
