"""The taint eviction controller on the fake clock: an untolerated NoExecute taint deletes at once,
the DefaultTolerationSeconds 300 s run out after a node goes unreachable, the pod stays Terminating
while its kubelet is down and goes once it is up; a taint removed in time cancels the deletion."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.controllers.kubelet import Kubelet
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings

SHAPES = (
    NodeShape("kubesim-1", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
    NodeShape("kubesim-2", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
)
GRACE = 40.0
TOLERATION = 300.0


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=SHAPES, node_monitor_grace_seconds=GRACE)


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


async def run_pod(sim: KubeSim, clock: FakeClock, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "kubesim-1", "containers": [{"name": "main", "image": "x"}], **spec},
    }
    sim.cluster.create(builtins.PODS, "default", body)
    await clock.advance(2.0)


def pod(sim: KubeSim, name: str) -> dict[str, Any] | None:
    items = sim.cluster.list(builtins.PODS, "default")["items"]
    return next((p for p in items if p["metadata"]["name"] == name), None)


def disruption(sim: KubeSim, name: str) -> dict[str, Any] | None:
    found = pod(sim, name)
    assert found is not None
    conditions = found["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "DisruptionTarget"), None)


def messages(sim: KubeSim) -> list[str]:
    items = sim.cluster.list(builtins.EVENTS, "default")["items"]
    return [e["message"] for e in items if e["reason"] == "TaintManagerEviction"]


def taint(sim: KubeSim, node: str, taints: list[dict[str, str]]) -> None:
    stored = sim.cluster.get(builtins.NODES, None, node)
    sim.cluster.update(builtins.NODES, None, node, {**stored, "spec": {"taints": taints}})


async def test_unreachable_pods_go_when_their_toleration_runs_out_and_stay_terminating(
    sim: KubeSim, clock: FakeClock
) -> None:
    await run_pod(sim, clock, "p", terminationGracePeriodSeconds=30)
    kubelet(sim).node_down("kubesim-1")
    await clock.advance(GRACE)
    await clock.advance(TOLERATION - 1)
    assert disruption(sim, "p") is None

    await clock.advance(1)
    condition = disruption(sim, "p")
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )
    assert messages(sim) == ["Marking for deletion Pod default/p"]
    # No kubelet confirms the delete: the pod stays Terminating, as on a real cluster.
    await clock.advance(600)
    stuck = pod(sim, "p")
    assert stuck is not None
    assert stuck["metadata"].get("deletionTimestamp")

    kubelet(sim).node_up("kubesim-1")
    await clock.advance(1)
    assert pod(sim, "p") is None


async def test_an_untolerated_no_execute_taint_deletes_at_once(
    sim: KubeSim, clock: FakeClock
) -> None:
    await run_pod(sim, clock, "plain")
    await run_pod(
        sim,
        clock,
        "tolerant",
        tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}],
    )
    taint(sim, "kubesim-1", [{"key": "maintenance", "effect": "NoExecute"}])
    await clock.settle()
    assert disruption(sim, "plain") is not None
    assert disruption(sim, "tolerant") is None  # tolerated forever
    await clock.advance(31)
    assert pod(sim, "plain") is None
    assert pod(sim, "tolerant") is not None


async def test_a_taint_removed_in_time_cancels_the_deletion(sim: KubeSim, clock: FakeClock) -> None:
    await run_pod(
        sim,
        clock,
        "p",
        tolerations=[
            {
                "key": "maintenance",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 60,
            }
        ],
    )
    taint(sim, "kubesim-1", [{"key": "maintenance", "effect": "NoExecute"}])
    await clock.advance(30)
    taint(sim, "kubesim-1", [])
    await clock.advance(60)
    assert disruption(sim, "p") is None
    assert messages(sim) == ["Cancelling deletion of Pod default/p"]
