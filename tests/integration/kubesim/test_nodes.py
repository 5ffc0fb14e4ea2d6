"""A shaped cluster through the real kubectl 1.32: `get nodes`, `get pods -o wide`, `cordon` and
`uncordon`, `describe node` (its Allocated resources and Non-terminated Pods come from a pod LIST
with spec.nodeName and status.phase field selectors), on the fake clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.nodes import NodeShape, uniform
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl

pytestmark = pytest.mark.kubectl

ALLOCATABLE = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"}


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=uniform(3, ALLOCATABLE))


def gpu_pod(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    resources = {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)}
    container = {
        "name": "main",
        "image": "example/main:1",
        "resources": {"requests": resources, "limits": resources},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **spec},
    }


async def test_get_nodes_and_cordon(sim: KubeSim, clock: FakeClock, kubectl: Kubectl) -> None:
    rc, out, err = await kubectl("get", "nodes")
    assert rc == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(row[0], row[1], row[2], row[4]) for row in lines[1:]] == [
        (f"kubesim-{i}", "Ready", "<none>", "v1.32.0") for i in (1, 2, 3)
    ]

    rc, out, err = await kubectl("cordon", "kubesim-2")
    assert (rc, out.strip()) == (0, "node/kubesim-2 cordoned"), err
    assert sim.cluster.get(builtins.NODES, None, "kubesim-2")["spec"]["unschedulable"] is True
    rc, out, err = await kubectl("get", "node", "kubesim-2", "--no-headers")
    assert out.split()[1] == "Ready,SchedulingDisabled", err
    sim.cluster.create(
        builtins.PODS,
        "default",
        gpu_pod("p", 4, nodeSelector={"kubernetes.io/hostname": "kubesim-2"}),
    )
    await clock.settle()
    rc, out, err = await kubectl("get", "pod", "p", "-o", "wide", "--no-headers")
    assert out.split()[1:3] == ["0/1", "Pending"], err
    assert out.split()[-4:] == [
        "<none>",
        "<none>",
        "<none>",
        "<none>",
    ]  # IP, NODE, NOMINATED NODE, GATES

    rc, out, err = await kubectl("uncordon", "kubesim-2")
    assert (rc, out.strip()) == (0, "node/kubesim-2 uncordoned"), err
    await clock.advance(1.0)
    rc, out, err = await kubectl("get", "pod", "p", "-o", "wide")
    header, row = out.splitlines()
    assert header.split()[-5:] == ["NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert row.split()[-3:] == ["kubesim-2", "<none>", "<none>"], err


async def test_describe_node_counts_the_non_terminated_pods(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    done = gpu_pod("done", 1, nodeName="kubesim-1", restartPolicy="Never")
    done["metadata"] = {**done["metadata"], "annotations": {"kubesim/run-seconds": "2"}}
    sim.cluster.create(builtins.PODS, "default", done)
    on_one = {"kubernetes.io/hostname": "kubesim-1"}
    for name, gpus in (("a", 3), ("b", 1)):
        sim.cluster.create(builtins.PODS, "default", gpu_pod(name, gpus, nodeSelector=on_one))
    await clock.settle()
    assert "nodeName" not in sim.cluster.get(builtins.PODS, "default", "b")["spec"]
    await clock.advance(3.0)  # `done` runs 2 s and succeeds: its GPU goes to b
    assert sim.cluster.get(builtins.PODS, "default", "done")["status"]["phase"] == "Succeeded"

    rc, out, err = await kubectl("describe", "node", "kubesim-1")
    assert rc == 0, err
    assert "Non-terminated Pods:          (2 in total)" in out
    allocated = out[out.index("Allocated resources:") :]
    rows = {
        line.split()[0]: line.split()[1:] for line in allocated.splitlines()[4:9] if line.strip()
    }
    assert rows["cpu"][:2] == ["4", "(25%)"]
    assert rows["nvidia.com/gpu"][:2] == ["4", "4"]
    assert "Unschedulable:      false" in out
    items = json.loads((await kubectl("get", "pods", "-o", "json"))[1])["items"]
    assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items} == {
        "a": "kubesim-1",
        "b": "kubesim-1",
        "done": "kubesim-1",
    }


class TestClusterFile:
    @pytest.fixture
    def kubesim_settings(self, clock: FakeClock) -> SimSettings:
        tainted = NodeShape("infra-1", ALLOCATABLE, labels={"role": "infra"})
        return SimSettings(clock=clock, nodes=(tainted,))

    async def test_labels_from_the_shape_show(self, kubectl: Kubectl) -> None:
        rc, out, err = await kubectl("get", "nodes", "-l", "role=infra", "-o", "name")
        assert (rc, out.strip()) == (0, "node/infra-1"), err
