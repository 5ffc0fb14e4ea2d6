"""GPUs the kubelet hands out at pod admission, on the fake clock: exclusive per container and pod,
freed when a pod ends, listed by the PodResources endpoint with what each container would see; a
pod bound past the scheduler to a node without free GPUs is rejected; the default node never
refuses."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import DeleteOptions
from kubesim.controllers.kubelet import Kubelet
from kubesim.devices import GPU, gpu_id
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings

SHAPES = (
    NodeShape("gpu-1", {"cpu": "64", "memory": "64Gi", GPU: "4", "pods": "110"}),
    NodeShape("cpu-1", {"cpu": "64", "memory": "64Gi", "pods": "110"}),
)


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=SHAPES)


def container(name: str, gpus: int = 0, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "example/main:1", **extra}
    if gpus:
        body["resources"] = {"limits": {GPU: str(gpus)}}
    return body


def pod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": list(containers), **spec},
    }


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


def held(sim: KubeSim, name: str) -> dict[str, tuple[str, ...]]:
    return kubelet(sim).devices.allocation(("default", name))


def ids(*indexes: int, node: str = "gpu-1") -> tuple[str, ...]:
    return tuple(gpu_id(node, i) for i in indexes)


async def test_ids_are_exclusive_and_freed_when_a_pod_ends(sim: KubeSim, clock: FakeClock) -> None:
    sim.cluster.create(
        builtins.PODS,
        "default",
        pod("a", container("x", 2), container("y", 1), container("z")),
    )
    await clock.settle()
    assert held(sim, "a") == {"x": ids(0, 1), "y": ids(2)}
    sim.cluster.create(builtins.PODS, "default", pod("b", container("x", 1), restartPolicy="Never"))
    await clock.settle()
    assert held(sim, "b") == {"x": ids(3)}

    # A pod that ends (here: deleted) frees its ids for the next one.
    sim.cluster.delete(builtins.PODS, "default", "a", options=DeleteOptions(grace_period_seconds=0))
    sim.cluster.create(builtins.PODS, "default", pod("c", container("x", 3)))
    await clock.settle()
    assert held(sim, "a") == {}
    assert held(sim, "c") == {"x": ids(0, 1, 2)}

    # So does one that turns terminal: evicted, Failed.
    await clock.advance(2.0)
    kubelet(sim).evict("default", "b")
    assert held(sim, "b") == {}
    assert kubelet(sim).devices.node("gpu-1").allocate("probe", pod("p", container("x", 1))["spec"])


async def test_init_container_ids_go_to_the_app_containers(sim: KubeSim, clock: FakeClock) -> None:
    body = pod(
        "p",
        container("main", 2),
        initContainers=[container("setup", 1), container("proxy", 1, restartPolicy="Always")],
    )
    sim.cluster.create(builtins.PODS, "default", body)
    await clock.settle()
    # The sidecar starts after `setup` ended and takes its id, then keeps it to itself.
    assert held(sim, "p") == {"setup": ids(0), "proxy": ids(0), "main": ids(1, 2)}


async def test_pod_resources_lists_ids_and_what_each_container_sees(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    no_gpu = container("sidecar", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    sim.cluster.create(
        builtins.PODS, "default", pod("p", container("main", 1), no_gpu, container("plain"))
    )
    await clock.settle()
    async with sim_http.get("/kubesim/v1/nodes/gpu-1/podresources") as resp:
        assert resp.status == 200
        listed = await resp.json()
    [entry] = listed["podResources"]
    assert (entry["name"], entry["namespace"]) == ("p", "default")
    by_name = {c["name"]: c for c in entry["containers"]}
    assert by_name["main"]["devices"] == [{"resourceName": GPU, "deviceIds": list(ids(0))}]
    assert by_name["main"]["nvidiaVisibleDevices"] == list(ids(0))
    # `all` in its own environment: every GPU of the node, though it asked for none.
    assert by_name["sidecar"]["devices"] == []
    assert by_name["sidecar"]["nvidiaVisibleDevices"] == list(ids(0, 1, 2, 3))
    assert by_name["plain"]["nvidiaVisibleDevices"] == []
    async with sim_http.get("/kubesim/v1/nodes/nowhere/podresources") as resp:
        assert resp.status == 404


async def test_a_pod_bound_past_the_scheduler_without_free_gpus_is_rejected(
    sim: KubeSim, clock: FakeClock
) -> None:
    sim.cluster.create(builtins.PODS, "default", pod("small", container("x", 3), nodeName="gpu-1"))
    sim.cluster.create(builtins.PODS, "default", pod("big", container("x", 2), nodeName="gpu-1"))
    # A node without GPUs has no device plugin for them: nothing to allocate, nothing refused.
    sim.cluster.create(builtins.PODS, "default", pod("cpu", container("x", 2), nodeName="cpu-1"))
    await clock.advance(5.0)
    assert sim.cluster.get(builtins.PODS, "default", "small")["status"]["phase"] == "Running"
    assert sim.cluster.get(builtins.PODS, "default", "cpu")["status"]["phase"] == "Running"
    assert held(sim, "cpu") == {}
    status = sim.cluster.get(builtins.PODS, "default", "big")["status"]
    message = (
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 2, Available: 1, which is unexpected"
    )
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "UnexpectedAdmissionError",
        f"Pod was rejected: {message}",
    )
    events = sim.cluster.list(builtins.EVENTS, "default")["items"]
    [rejected] = [e for e in events if e["reason"] == "UnexpectedAdmissionError"]
    assert (rejected["type"], rejected["message"]) == ("Warning", message)
    sim.cluster.delete(builtins.PODS, "default", "big")
    await clock.settle()
    names = {p["metadata"]["name"] for p in sim.cluster.list(builtins.PODS, "default")["items"]}
    assert names == {"small", "cpu"}


@pytest.mark.parametrize("kubesim_settings", [SimSettings(clock=FakeClock())])
async def test_the_default_node_never_refuses_a_gpu_pod(
    sim: KubeSim, kubesim_settings: SimSettings
) -> None:
    clock = kubesim_settings.clock
    assert isinstance(clock, FakeClock)
    for name in ("a", "b"):
        sim.cluster.create(builtins.PODS, "default", pod(name, container("x", 8)))
    await clock.advance(2.0)
    node = "kubesim-node"
    assert held(sim, "a") == {"x": ids(*range(8), node=node)}
    assert held(sim, "b") == {"x": ids(*range(8, 16), node=node)}
    assert sim.cluster.get(builtins.PODS, "default", "b")["status"]["phase"] == "Running"


SHARED = NodeShape("shared-1", {"cpu": "64", GPU: "2", "pods": "110"}, gpu_replicas=2)


@pytest.mark.parametrize("kubesim_settings", [SimSettings(clock=FakeClock(), nodes=(SHARED,))])
async def test_a_time_sliced_node_runs_a_pod_per_share_and_each_sees_its_gpu(
    sim: KubeSim, kubesim_settings: SimSettings, sim_http: aiohttp.ClientSession
) -> None:
    """Two GPUs shared two ways: four one-GPU pods run, spread over both GPUs; a fifth waits for
    the scheduler; each container sees the one GPU behind its share."""
    clock = kubesim_settings.clock
    assert isinstance(clock, FakeClock)
    node = sim.cluster.get(builtins.NODES, None, "shared-1")
    assert node["status"]["allocatable"][GPU] == "4"
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"
    for name in ("a", "b", "c", "d", "e"):
        sim.cluster.create(builtins.PODS, "default", pod(name, container("x", 1)))
    await clock.advance(2.0)
    phases = {
        p["metadata"]["name"]: p["status"]["phase"]
        for p in sim.cluster.list(builtins.PODS, "default")["items"]
    }
    assert phases == {
        "a": "Running",
        "b": "Running",
        "c": "Running",
        "d": "Running",
        "e": "Pending",
    }
    first, second = gpu_id("shared-1", 0), gpu_id("shared-1", 1)
    given = {name: held(sim, name)["x"] for name in "abcd"}
    assert sorted(given.values()) == [
        (f"{first}::0",),
        (f"{first}::1",),
        (f"{second}::0",),
        (f"{second}::1",),
    ]
    async with sim_http.get("/kubesim/v1/nodes/shared-1/podresources") as resp:
        listed = await resp.json()
    seen = {
        entry["name"]: entry["containers"][0]["nvidiaVisibleDevices"]
        for entry in listed["podResources"]
    }
    assert seen == {name: [shares[0].split("::")[0]] for name, shares in given.items()}
    assert sorted(s[0] for s in seen.values()) == [first, first, second, second]
