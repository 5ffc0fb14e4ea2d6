"""The simulated kubelet through the real Cluster: pod phases, init containers, restarts, deletion, eviction,
kill."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from sim_controller_helpers import eventually, fast_settings

from kubesim import table
from kubesim.app import KubeSim
from kubesim.cluster import DeleteOptions
from kubesim.controllers.kubelet import Kubelet
from kubesim.errors import StatusError
from kubesim.settings import SimSettings

# 100 simulated seconds per real second: annotation values below are simulated seconds.


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_settings()


@pytest.fixture
def sim(kubesim: KubeSim) -> KubeSim:
    """The `kubesim` fixture's cluster, running with the settings above."""
    return kubesim


def make_pod(
    sim: KubeSim, name: str, annotations: dict[str, str], *, policy: str = "Never", **spec: Any
) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": policy, "containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    sim.cluster.create(pods, "default", body)


def get_pod(sim: KubeSim, name: str) -> dict[str, Any]:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    return sim.cluster.get(pods, "default", name)


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


def container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod["status"]["containerStatuses"]
    assert len(statuses) == 1
    result: dict[str, Any] = statuses[0]
    return result


def condition(pod: dict[str, Any], ctype: str) -> str | None:
    return next((c["status"] for c in pod["status"].get("conditions", []) if c["type"] == ctype), None)


@pytest.mark.parametrize(
    ("policy", "code", "phase", "reason"),
    [
        ("Never", "1", "Failed", "Error"),
        ("Never", "0", "Succeeded", "Completed"),
        ("OnFailure", "0", "Succeeded", "Completed"),
    ],
    ids=["never-exit-1", "never-exit-0", "onfailure-exit-0"],
)
async def test_pod_exits_after_run_seconds_with_exit_code(
    sim: KubeSim, policy: str, code: str, phase: str, reason: str
) -> None:
    make_pod(sim, "p", {"kubesim/run-seconds": "2", "kubesim/exit-code": code}, policy=policy)
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    pod = await eventually(lambda: (p := get_pod(sim, "p"))["status"]["phase"] == phase and p)
    terminated = container(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (int(code), reason)
    assert condition(pod, "Ready") == "False"


async def test_pod_goes_pending_running_ready(sim: KubeSim) -> None:
    make_pod(sim, "p", {"kubesim/start-seconds": "10", "kubesim/ready-seconds": "10"})
    await asyncio.sleep(0.02)
    pending = get_pod(sim, "p")
    assert pending["status"]["phase"] == "Pending"
    assert condition(pending, "PodScheduled") == "True"
    running = await eventually(lambda: (p := get_pod(sim, "p"))["status"]["phase"] == "Running" and p)
    assert ipaddress.ip_address(running["status"]["podIP"]) in ipaddress.ip_network("10.244.0.0/16")
    assert running["status"]["hostIP"]
    assert running["status"]["startTime"]
    assert condition(running, "Ready") == "False"
    assert container(running)["ready"] is False
    assert container(running)["restartCount"] == 0
    ready = await eventually(lambda: (p := get_pod(sim, "p")) and condition(p, "Ready") == "True" and p)
    assert container(ready)["ready"] is True
    assert condition(ready, "ContainersReady") == "True"


async def test_ready_false_annotation_keeps_pod_unready(sim: KubeSim) -> None:
    make_pod(sim, "p", {"kubesim/ready": "false", "kubesim/ready-seconds": "0"})
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    await asyncio.sleep(0.1)
    pod = get_pod(sim, "p")
    assert condition(pod, "Ready") == "False"
    assert pod["status"]["phase"] == "Running"


async def test_onfailure_restarts_in_place_then_ready_again(sim: KubeSim) -> None:
    make_pod(sim, "p", {"kubesim/run-seconds": "5", "kubesim/exit-code": "3"}, policy="OnFailure")
    pod = await eventually(lambda: (p := get_pod(sim, "p")) and container(p)["restartCount"] >= 1 and p)
    assert pod["status"]["phase"] == "Running"
    assert container(pod)["lastState"]["terminated"]["exitCode"] == 3
    await eventually(lambda: condition(get_pod(sim, "p"), "Ready") == "True")


async def test_always_restarts_after_success(sim: KubeSim) -> None:
    make_pod(sim, "p", {"kubesim/run-seconds": "3"}, policy="Always")
    pod = await eventually(lambda: (p := get_pod(sim, "p")) and container(p)["restartCount"] >= 2 and p)
    assert pod["status"]["phase"] == "Running"
    assert container(pod)["lastState"]["terminated"]["reason"] == "Completed"


async def test_deleted_pod_is_stopped_then_removed(sim: KubeSim) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    make_pod(sim, "p", {"kubesim/termination-seconds": "20"}, policy="Always")
    await eventually(lambda: condition(get_pod(sim, "p"), "Ready") == "True")
    deleting = sim.cluster.delete(pods, "default", "p")
    assert deleting["metadata"]["deletionTimestamp"]
    await asyncio.sleep(0.05)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    started = time.monotonic()
    await eventually(lambda: not sim.cluster.list(pods, "default")["items"])
    assert time.monotonic() - started < 0.5


async def test_deleted_pod_with_finalizer_ends_in_terminal_phase(sim: KubeSim) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    make_pod(sim, "p", {"kubesim/termination-seconds": "1"}, policy="Always")
    pod = await eventually(lambda: (p := get_pod(sim, "p"))["status"]["phase"] == "Running" and p)
    sim.cluster.update(
        pods, "default", "p", {**pod, "metadata": {**pod["metadata"], "finalizers": ["test/hold"]}}
    )
    sim.cluster.delete(pods, "default", "p")
    stopped = await eventually(lambda: (p := get_pod(sim, "p"))["status"]["phase"] == "Failed" and p)
    assert container(stopped)["state"]["terminated"]["exitCode"] == 143
    assert stopped["metadata"]["deletionGracePeriodSeconds"] == 0
    sim.cluster.update(
        pods, "default", "p", {**stopped, "metadata": {**stopped["metadata"], "finalizers": []}}
    )
    with pytest.raises(StatusError):
        get_pod(sim, "p")


async def test_evict_fails_pod_with_reason(sim: KubeSim) -> None:
    make_pod(sim, "p", {}, policy="Always")
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    kubelet(sim).evict("default", "p", "The node was low on resource: memory.")
    pod = get_pod(sim, "p")
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "Evicted")
    assert pod["status"]["message"] == "The node was low on resource: memory."
    assert condition(pod, "DisruptionTarget") == "True"
    await asyncio.sleep(0.05)
    assert get_pod(sim, "p")["status"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("policy", "phase", "restarts"),
    [("Never", "Failed", 0), ("OnFailure", "Running", 1), ("Always", "Running", 1)],
    ids=["never", "onfailure", "always"],
)
async def test_kill_exits_container_now(sim: KubeSim, policy: str, phase: str, restarts: int) -> None:
    make_pod(sim, "p", {}, policy=policy)
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    kubelet(sim).kill("default", "p", 137)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == phase
    assert container(pod)["restartCount"] == restarts
    ended = container(pod)["state"].get("terminated") or container(pod)["lastState"]["terminated"]
    assert ended["exitCode"] == 137


async def test_unknown_pod_cannot_be_evicted(sim: KubeSim) -> None:
    with pytest.raises(StatusError):
        kubelet(sim).evict("default", "nope")


async def test_pod_waits_for_its_configmap(sim: KubeSim) -> None:
    volume = {"name": "cfg", "configMap": {"name": "late"}}
    make_pod(sim, "p", {"kubesim/start-seconds": "0"}, volumes=[volume])
    await asyncio.sleep(0.1)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == "Pending"
    assert container(pod)["state"]["waiting"]["reason"] == "ContainerCreating"
    cms = sim.cluster.registry.by_kind("v1", "ConfigMap")
    assert cms is not None
    sim.cluster.create(cms, "default", {"metadata": {"name": "late"}, "data": {"a": "1"}})
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")


async def test_many_pods_get_unique_ips_and_run(sim: KubeSim) -> None:
    for i in range(300):
        make_pod(
            sim, f"p{i}", {"kubesim/start-seconds": "0.5", "kubesim/ready-seconds": "0.5"}, policy="Always"
        )
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None

    def all_ready() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = sim.cluster.list(pods, "default")["items"]
        return items if all(condition(p, "Ready") == "True" for p in items) else []

    items = await eventually(all_ready, within=10)
    ips = {p["status"]["podIP"] for p in items}
    assert len(ips) == 300


async def test_grace_zero_delete_leaves_no_runtime(sim: KubeSim) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    make_pod(sim, "p", {}, policy="Always")
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    sim.cluster.delete(pods, "default", "p", options=DeleteOptions(grace_period_seconds=0))
    await eventually(lambda: kubelet(sim).runtime("default", "p") is None)


@pytest.fixture
async def http(sim: KubeSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(sim.url) as session:
        yield session


@pytest.mark.parametrize(
    ("verb", "body", "status", "phase", "exit_code"),
    [
        ("evict", {"message": "disk pressure"}, 200, "Failed", 137),
        ("kill", {"exitCode": 3}, 200, "Failed", 3),
        ("kill", None, 200, "Failed", 137),
        ("kill", {"exitCode": "x"}, 400, "Running", None),
    ],
    ids=["evict", "kill-with-code", "kill-default-code", "kill-bad-code"],
)
async def test_faults_over_http(
    sim: KubeSim,
    http: aiohttp.ClientSession,
    verb: str,
    body: dict[str, Any] | None,
    status: int,
    phase: str,
    exit_code: int | None,
) -> None:
    make_pod(sim, "p", {})
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    async with http.post(f"/kubesim/v1/namespaces/default/pods/p/{verb}", json=body) as resp:
        assert resp.status == status
        answer = await resp.json()
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == phase
    if exit_code is not None:
        assert answer["status"]["phase"] == phase
        assert container(pod)["state"]["terminated"]["exitCode"] == exit_code
    if verb == "evict":
        assert pod["status"]["message"] == "disk pressure"


async def test_faults_over_http_on_a_missing_pod(http: aiohttp.ClientSession) -> None:
    async with http.post("/kubesim/v1/namespaces/default/pods/ghost/kill") as resp:
        assert resp.status == 404
        assert (await resp.json())["reason"] == "NotFound"


async def test_kubelet_registers_its_ready_node(sim: KubeSim) -> None:
    nodes = sim.cluster.registry.by_kind("v1", "Node")
    assert nodes is not None
    node = await eventually(lambda: sim.cluster.get(nodes, None, sim.settings.node_name))
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == sim.settings.node_name
    make_pod(sim, "p", {})
    pod = await eventually(lambda: (p := get_pod(sim, "p"))["status"]["phase"] == "Running" and p)
    assert pod["spec"]["nodeName"] == node["metadata"]["name"]
    assert pod["status"]["hostIP"] == node["status"]["addresses"][0]["address"]


# --- init containers ---------------------------------------------------------------------------------


def init_container(name: str, *, sidecar: bool = False) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **({"restartPolicy": "Always"} if sidecar else {})}


def printed_status(sim: KubeSim, pod: dict[str, Any]) -> str:
    """The STATUS column `kubectl get pods` shows (the Table the API server renders)."""
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    return str(table.cells(pods, pod, datetime.now(UTC))[2])


def init_state(pod: dict[str, Any], index: int = 0) -> str:
    return next(iter(pod["status"]["initContainerStatuses"][index]["state"]))


async def test_init_containers_run_in_order_then_the_pod_gets_ready(sim: KubeSim) -> None:
    make_pod(
        sim,
        "p",
        {"kubesim/start-seconds": "5", "kubesim/init-seconds": "10", "kubesim/ready-seconds": "5"},
        initContainers=[init_container("setup"), init_container("warm")],
    )
    seen: list[tuple[str, str, str, str, str]] = []

    def observe() -> bool:
        pod = get_pod(sim, "p")
        if "initContainerStatuses" in pod["status"]:
            row = (
                pod["status"]["phase"],
                printed_status(sim, pod),
                init_state(pod, 0),
                init_state(pod, 1),
                str(condition(pod, "Initialized")),
            )
            if not seen or seen[-1] != row:
                seen.append(row)
        return condition(pod, "Ready") == "True"

    await eventually(observe)
    assert seen == [
        ("Pending", "Init:0/2", "waiting", "waiting", "False"),
        ("Pending", "Init:0/2", "running", "waiting", "False"),
        ("Pending", "Init:1/2", "terminated", "running", "False"),
        ("Running", "Running", "terminated", "terminated", "True"),
    ]
    pod = get_pod(sim, "p")
    first, second = (s["state"]["terminated"] for s in pod["status"]["initContainerStatuses"])
    assert (first["exitCode"], first["reason"]) == (0, "Completed")
    assert first["finishedAt"] <= second["startedAt"]
    assert container(pod)["state"]["running"]["startedAt"] >= second["finishedAt"]


async def test_default_init_seconds_follow_the_time_scale(sim: KubeSim) -> None:
    make_pod(sim, "p", {"kubesim/start-seconds": "0"}, initContainers=[init_container("setup")])
    started = time.monotonic()
    await eventually(lambda: get_pod(sim, "p")["status"]["phase"] == "Running")
    rt = kubelet(sim).runtime("default", "p")
    assert rt is not None
    (run,) = rt.init_runs
    assert run.finished_at == pytest.approx(run.started_at + 0.1)
    # 0.1 simulated seconds are 1 ms at 100x: far from a real 0.1 s even on a busy machine.
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(
    ("policy", "phase", "printed"),
    [
        ("Never", "Failed", "Init:Error"),
        ("OnFailure", "Pending", "Init:0/1"),
        ("Always", "Pending", "Init:0/1"),
    ],
    ids=["never-fails-the-pod", "onfailure-restarts-it", "always-restarts-it"],
)
async def test_failing_init_container(sim: KubeSim, policy: str, phase: str, printed: str) -> None:
    make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "5", "kubesim/init-exit-code": "2"},
        policy=policy,
        initContainers=[init_container("setup")],
    )

    def ended() -> dict[str, Any] | bool:
        pod = get_pod(sim, "p")
        init = (pod["status"].get("initContainerStatuses") or [{}])[0]
        done = pod["status"]["phase"] == "Failed" or init.get("restartCount", 0) >= 2
        return pod if done else False

    pod = await eventually(ended)
    assert (pod["status"]["phase"], printed_status(sim, pod)) == (phase, printed)
    (init,) = pod["status"]["initContainerStatuses"]
    exited = init["state"].get("terminated") or init["lastState"]["terminated"]
    assert (exited["exitCode"], exited["reason"]) == (2, "Error")
    assert container(pod)["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(pod, "Initialized") == "False"


async def test_sidecar_init_container_keeps_running_beside_the_app(sim: KubeSim) -> None:
    make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "5"},
        policy="Always",
        initContainers=[init_container("proxy", sidecar=True), init_container("setup")],
    )
    pod = await eventually(lambda: (p := get_pod(sim, "p")) and condition(p, "Ready") == "True" and p)
    assert [init_state(pod, i) for i in (0, 1)] == ["running", "terminated"]
    proxy = pod["status"]["initContainerStatuses"][0]
    assert (proxy["started"], proxy["ready"]) == (True, True)
    assert printed_status(sim, pod) == "Running"


async def test_pod_deleted_during_init_is_stopped_and_removed(sim: KubeSim) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "1000", "kubesim/termination-seconds": "5"},
        initContainers=[init_container("setup")],
    )
    await eventually(lambda: init_state(get_pod(sim, "p")) == "running")
    sim.cluster.delete(pods, "default", "p")
    await eventually(lambda: not sim.cluster.list(pods, "default")["items"])
    await eventually(lambda: kubelet(sim).runtime("default", "p") is None)
