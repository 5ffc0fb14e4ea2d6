"""A node's kubelet going down and up, on the fake clock: the node lifecycle controller's Unknown
conditions, unreachable taints and not-ready pods after the grace period; the kubelet's frozen pods;
the taints gone and the pods reported again (a container that died with the node restarted) once
the node is up; the HTTP endpoints."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.controllers.kubelet import Kubelet
from kubesim.errors import StatusError
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings

SHAPES = (
    NodeShape("kubesim-1", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
    NodeShape("kubesim-2", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
)
GRACE = 40.0


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=SHAPES, node_monitor_grace_seconds=GRACE)


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


async def run_pod(sim: KubeSim, clock: FakeClock, name: str, node: str, **spec: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}], **spec},
    }
    sim.cluster.create(builtins.PODS, "default", body)
    await clock.advance(2.0)
    assert condition(pod(sim, name), "Ready")["status"] == "True"


def pod(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(builtins.PODS, "default", name)


def node(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(builtins.NODES, None, name)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == ctype)


def taints(sim: KubeSim, name: str) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in node(sim, name)["spec"].get("taints") or []]


def events(sim: KubeSim, reason: str) -> list[dict[str, Any]]:
    items = sim.cluster.list(builtins.EVENTS, "default")["items"]
    return [e for e in items if e["reason"] == reason]


async def test_a_silent_kubelet_makes_its_node_unknown_after_the_grace_period(
    sim: KubeSim, clock: FakeClock
) -> None:
    await run_pod(sim, clock, "p", "kubesim-1")
    kubelet(sim).node_down("kubesim-1")
    await clock.advance(GRACE - 1)
    assert condition(node(sim, "kubesim-1"), "Ready")["status"] == "True"
    assert taints(sim, "kubesim-1") == []

    await clock.advance(1)
    ready = condition(node(sim, "kubesim-1"), "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )
    assert condition(node(sim, "kubesim-1"), "MemoryPressure")["status"] == "Unknown"
    assert taints(sim, "kubesim-1") == [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    noexec = node(sim, "kubesim-1")["spec"]["taints"][1]
    assert noexec["timeAdded"]
    assert condition(pod(sim, "p"), "Ready")["status"] == "False"
    assert pod(sim, "p")["status"]["phase"] == "Running"  # the dead kubelet reports nothing
    assert [e["message"] for e in events(sim, "NodeNotReady")] == [
        "Node kubesim-1 status is now: NodeNotReady",
        "Node is not ready",
    ]
    assert condition(node(sim, "kubesim-2"), "Ready")["status"] == "True"


async def test_up_posts_ready_sheds_the_taints_and_reports_the_restarted_containers(
    sim: KubeSim, clock: FakeClock
) -> None:
    await run_pod(sim, clock, "always", "kubesim-1")
    await run_pod(sim, clock, "never", "kubesim-1", restartPolicy="Never")
    kubelet(sim).node_down("kubesim-1")
    await clock.advance(GRACE + 10)
    kubelet(sim).node_up("kubesim-1")
    await clock.settle()
    assert condition(node(sim, "kubesim-1"), "Ready")["status"] == "True"
    assert taints(sim, "kubesim-1") == []

    always = pod(sim, "always")["status"]
    assert always["phase"] == "Running"
    container = always["containerStatuses"][0]
    assert container["restartCount"] == 1
    assert container["lastState"]["terminated"]["exitCode"] == 255
    assert container["lastState"]["terminated"]["reason"] == "Unknown"
    never = pod(sim, "never")["status"]
    assert never["phase"] == "Failed"
    assert never["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 255
    await clock.advance(1)
    assert condition(pod(sim, "always"), "Ready")["status"] == "True"


async def test_up_before_the_grace_period_leaves_the_node_ready(
    sim: KubeSim, clock: FakeClock
) -> None:
    kubelet(sim).node_down("kubesim-2")
    await clock.advance(GRACE / 2)
    kubelet(sim).node_up("kubesim-2")
    await clock.advance(GRACE)
    assert condition(node(sim, "kubesim-2"), "Ready")["status"] == "True"
    assert taints(sim, "kubesim-2") == []


async def test_a_down_nodes_pods_are_frozen_and_refuse_faults(
    sim: KubeSim, clock: FakeClock
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "short",
            "namespace": "default",
            "annotations": {"kubesim/run-seconds": "5"},
        },
        "spec": {
            "nodeName": "kubesim-1",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x"}],
        },
    }
    sim.cluster.create(builtins.PODS, "default", body)
    await clock.advance(2.0)
    kubelet(sim).node_down("kubesim-1")
    await clock.advance(20)
    assert pod(sim, "short")["status"]["phase"] == "Running"
    with pytest.raises(StatusError) as raised:
        kubelet(sim).evict("default", "short")
    assert raised.value.code == 409
    with pytest.raises(StatusError) as missing:
        kubelet(sim).node_down("nowhere")
    assert missing.value.code == 404


async def test_down_and_up_over_http(sim: KubeSim, sim_http: aiohttp.ClientSession) -> None:
    async with sim_http.post("/kubesim/v1/nodes/kubesim-2/down") as answer:
        assert answer.status == 200
        assert (await answer.json())["metadata"]["name"] == "kubesim-2"
    assert kubelet(sim).is_down("kubesim-2")
    async with sim_http.post("/kubesim/v1/nodes/kubesim-2/up") as answer:
        assert answer.status == 200
    assert not kubelet(sim).is_down("kubesim-2")
    async with sim_http.post("/kubesim/v1/nodes/nowhere/down") as answer:
        assert answer.status == 404
