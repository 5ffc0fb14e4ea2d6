"""The simulated kubelet through the real Cluster: pod phases, init containers, restarts, deletion,
eviction, kill.

The cluster runs on the fake clock (conftest.py): annotation values below are simulated seconds, and
a test moves time itself, so it can check what a pod looks like just before and just after each due
time.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from kubesim import builtins, table
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import DeleteOptions, EventType
from kubesim.controllers.kubelet import Kubelet
from kubesim.errors import StatusError
from kubesim.nodes import NodeShape
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings
from kubesim.testing import decode_changes

JUST = 2**-10
"""A simulated instant: `advance(due - JUST)` checks the state right before something is due (a
power of two, so that adding it back lands exactly on `due`)."""


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


@pytest.fixture(autouse=True)
def statuses_need_no_decode(sim: KubeSim) -> Iterator[None]:
    """The kubelet's status writes skip admission's schema walk (`decoded=True`): every pod these
    tests drive (phases, init containers, sidecars, restarts, deletion, eviction, kill) must be
    stored just as the walk would have left it, with nothing unknown or undecodable."""
    problems: list[str] = []

    def check(
        event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.kind == "Pod" and event != "DELETED" and (change := decode_changes(obj, "v1", "Pod")):
            problems.append(f"{obj['metadata']['name']}: {change}")

    sim.cluster.add_listener(check)
    yield
    sim.cluster.remove_listener(check)
    assert problems == []


async def make_pod(
    sim: KubeSim, name: str, annotations: dict[str, str], *, policy: str = "Never", **spec: Any
) -> None:
    """Creates the pod and lets the kubelet take it in, at the current simulated time."""
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "restartPolicy": policy,
            "containers": [{"name": "main", "image": "busybox"}],
            **spec,
        },
    }
    sim.cluster.create(pods, "default", body)
    await fake_clock(sim).settle()


def get_pod(sim: KubeSim, name: str) -> dict[str, Any]:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    return sim.cluster.get(pods, "default", name)


def kubelet(sim: KubeSim) -> Kubelet:
    assert sim.controllers.kubelet is not None
    return sim.controllers.kubelet


def fake_clock(sim: KubeSim) -> FakeClock:
    assert isinstance(sim.controllers.clock, FakeClock)
    return sim.controllers.clock


def container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod["status"]["containerStatuses"]
    assert len(statuses) == 1
    result: dict[str, Any] = statuses[0]
    return result


def condition(pod: dict[str, Any], ctype: str) -> str | None:
    return next(
        (c["status"] for c in pod["status"].get("conditions", []) if c["type"] == ctype), None
    )


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
    sim: KubeSim, clock: FakeClock, policy: str, code: str, phase: str, reason: str
) -> None:
    await make_pod(sim, "p", {"kubesim/run-seconds": "2", "kubesim/exit-code": code}, policy=policy)
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    # run-seconds count from the container's start (t=1), not from the pod's creation.
    await clock.advance(2 - JUST)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    await clock.advance(JUST)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == phase
    terminated = container(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (int(code), reason)
    assert condition(pod, "Ready") == "False"


async def test_pod_goes_pending_running_ready(sim: KubeSim, clock: FakeClock) -> None:
    await make_pod(sim, "p", {"kubesim/start-seconds": "10", "kubesim/ready-seconds": "10"})
    await clock.advance(10 - JUST)
    pending = get_pod(sim, "p")
    assert pending["status"]["phase"] == "Pending"
    assert condition(pending, "PodScheduled") == "True"
    await clock.advance(JUST)
    running = get_pod(sim, "p")
    assert running["status"]["phase"] == "Running"
    assert ipaddress.ip_address(running["status"]["podIP"]) in ipaddress.ip_network("10.244.0.0/16")
    assert running["status"]["hostIP"]
    assert running["status"]["startTime"]
    assert condition(running, "Ready") == "False"
    assert container(running)["ready"] is False
    assert container(running)["restartCount"] == 0
    await clock.advance(10 - JUST)
    assert condition(get_pod(sim, "p"), "Ready") == "False"
    await clock.advance(JUST)
    ready = get_pod(sim, "p")
    assert condition(ready, "Ready") == "True"
    assert container(ready)["ready"] is True
    assert condition(ready, "ContainersReady") == "True"


async def test_ready_false_annotation_keeps_pod_unready(sim: KubeSim, clock: FakeClock) -> None:
    await make_pod(sim, "p", {"kubesim/ready": "false", "kubesim/ready-seconds": "0"})
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    await clock.advance(3600)
    pod = get_pod(sim, "p")
    assert condition(pod, "Ready") == "False"
    assert pod["status"]["phase"] == "Running"


async def test_onfailure_restarts_in_place_then_ready_again(sim: KubeSim, clock: FakeClock) -> None:
    await make_pod(
        sim, "p", {"kubesim/run-seconds": "5", "kubesim/exit-code": "3"}, policy="OnFailure"
    )
    await clock.advance(1 + 5)
    pod = get_pod(sim, "p")
    assert container(pod)["restartCount"] == 1
    assert pod["status"]["phase"] == "Running"
    assert container(pod)["lastState"]["terminated"]["exitCode"] == 3
    # The restarted container is not ready until its own ready-seconds have passed.
    assert condition(pod, "Ready") == "False"
    await clock.advance(1)
    assert condition(get_pod(sim, "p"), "Ready") == "True"


async def test_always_restarts_after_success(sim: KubeSim, clock: FakeClock) -> None:
    await make_pod(sim, "p", {"kubesim/run-seconds": "3"}, policy="Always")
    await clock.advance(1 + 3 + 3)
    pod = get_pod(sim, "p")
    assert container(pod)["restartCount"] == 2
    assert pod["status"]["phase"] == "Running"
    assert container(pod)["lastState"]["terminated"]["reason"] == "Completed"


@pytest.mark.parametrize(
    ("grace", "stops_after"),
    [(None, 20.0), (5, 5.0)],
    ids=["termination-seconds-within-the-grace", "grace-shorter-than-termination-seconds"],
)
async def test_deleted_pod_is_stopped_then_removed(
    sim: KubeSim, clock: FakeClock, grace: int | None, stops_after: float
) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await make_pod(sim, "p", {"kubesim/termination-seconds": "20"}, policy="Always")
    await clock.advance(2)
    assert condition(get_pod(sim, "p"), "Ready") == "True"
    deleting = sim.cluster.delete(
        pods, "default", "p", options=DeleteOptions(grace_period_seconds=grace)
    )
    assert deleting["metadata"]["deletionTimestamp"]
    # The containers stop after min(the deletion grace (30 s by default), termination-seconds).
    await clock.advance(stops_after - JUST)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    await clock.advance(JUST)
    assert not sim.cluster.list(pods, "default")["items"]


async def test_deleted_pod_with_finalizer_ends_in_terminal_phase(
    sim: KubeSim, clock: FakeClock
) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await make_pod(sim, "p", {"kubesim/termination-seconds": "1"}, policy="Always")
    await clock.advance(1)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == "Running"
    sim.cluster.update(
        pods, "default", "p", {**pod, "metadata": {**pod["metadata"], "finalizers": ["test/hold"]}}
    )
    sim.cluster.delete(pods, "default", "p")
    await clock.advance(1)
    stopped = get_pod(sim, "p")
    assert stopped["status"]["phase"] == "Failed"
    assert container(stopped)["state"]["terminated"]["exitCode"] == 143
    assert stopped["metadata"]["deletionGracePeriodSeconds"] == 0
    sim.cluster.update(
        pods, "default", "p", {**stopped, "metadata": {**stopped["metadata"], "finalizers": []}}
    )
    with pytest.raises(StatusError):
        get_pod(sim, "p")


async def test_evict_fails_pod_with_reason(sim: KubeSim, clock: FakeClock) -> None:
    await make_pod(sim, "p", {}, policy="Always")
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    kubelet(sim).evict("default", "p", "The node was low on resource: memory.")
    pod = get_pod(sim, "p")
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "Evicted")
    assert pod["status"]["message"] == "The node was low on resource: memory."
    assert condition(pod, "DisruptionTarget") == "True"
    # restartPolicy Always does not bring an evicted pod back.
    await clock.advance(3600)
    assert get_pod(sim, "p")["status"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("policy", "phase", "restarts"),
    [("Never", "Failed", 0), ("OnFailure", "Running", 1), ("Always", "Running", 1)],
    ids=["never", "onfailure", "always"],
)
async def test_kill_exits_container_now(
    sim: KubeSim, clock: FakeClock, policy: str, phase: str, restarts: int
) -> None:
    await make_pod(sim, "p", {}, policy=policy)
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    kubelet(sim).kill("default", "p", 137)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == phase
    assert container(pod)["restartCount"] == restarts
    ended = container(pod)["state"].get("terminated") or container(pod)["lastState"]["terminated"]
    assert ended["exitCode"] == 137


async def test_an_evicted_pod_frees_its_node_for_the_scheduler(clock: FakeClock) -> None:
    shape = NodeShape("kubesim-1", {"cpu": "2", "memory": "4Gi", "pods": "110"})
    async with KubeSim(SimSettings(clock=clock, nodes=(shape,))) as small:
        for name in ("first", "second"):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "x", "resources": {"requests": {"cpu": "2"}}}
                    ]
                },
            }
            small.cluster.create(builtins.PODS, "default", body)
            await clock.advance(2)
        assert get_pod(small, "second")["spec"].get("nodeName") is None
        kubelet(small).evict("default", "first")
        pod = get_pod(small, "first")
        disruption = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (disruption["reason"], disruption["message"]) == (
            "TerminationByKubelet",
            "The node was low on resource: memory.",
        )
        await clock.advance(2)  # the scheduler's back-off
        assert get_pod(small, "second")["spec"]["nodeName"] == "kubesim-1"


async def test_unknown_pod_cannot_be_evicted(sim: KubeSim) -> None:
    with pytest.raises(StatusError):
        kubelet(sim).evict("default", "nope")


async def test_pod_waits_for_its_configmap(sim: KubeSim, clock: FakeClock) -> None:
    volume = {"name": "cfg", "configMap": {"name": "late"}}
    await make_pod(sim, "p", {"kubesim/start-seconds": "0"}, volumes=[volume])
    await clock.advance(10)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == "Pending"
    assert container(pod)["state"]["waiting"]["reason"] == "ContainerCreating"
    cms = sim.cluster.registry.by_kind("v1", "ConfigMap")
    assert cms is not None
    sim.cluster.create(cms, "default", {"metadata": {"name": "late"}, "data": {"a": "1"}})
    # The kubelet retries the mount once a (simulated) second.
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"


async def test_many_pods_get_unique_ips_and_run(sim: KubeSim, clock: FakeClock) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    annotations = {"kubesim/start-seconds": "0.5", "kubesim/ready-seconds": "0.5"}
    for i in range(300):
        body = {
            "metadata": {"name": f"p{i}", "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
        sim.cluster.create(pods, "default", body)
    await clock.advance(1)
    items: list[dict[str, Any]] = sim.cluster.list(pods, "default")["items"]
    assert len(items) == 300
    assert all(condition(p, "Ready") == "True" for p in items)
    ips = {p["status"]["podIP"] for p in items}
    assert len(ips) == 300


async def test_grace_zero_delete_leaves_no_runtime(sim: KubeSim, clock: FakeClock) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await make_pod(sim, "p", {}, policy="Always")
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    sim.cluster.delete(pods, "default", "p", options=DeleteOptions(grace_period_seconds=0))
    await clock.settle()
    assert kubelet(sim).runtime("default", "p") is None


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
    clock: FakeClock,
    sim_http: aiohttp.ClientSession,
    verb: str,
    body: dict[str, Any] | None,
    status: int,
    phase: str,
    exit_code: int | None,
) -> None:
    await make_pod(sim, "p", {})
    await clock.advance(1)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    async with sim_http.post(f"/kubesim/v1/namespaces/default/pods/p/{verb}", json=body) as resp:
        assert resp.status == status
        answer = await resp.json()
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == phase
    if exit_code is not None:
        assert answer["status"]["phase"] == phase
        assert container(pod)["state"]["terminated"]["exitCode"] == exit_code
    if verb == "evict":
        assert pod["status"]["message"] == "disk pressure"


async def test_faults_over_http_on_a_missing_pod(sim_http: aiohttp.ClientSession) -> None:
    async with sim_http.post("/kubesim/v1/namespaces/default/pods/ghost/kill") as resp:
        assert resp.status == 404
        assert (await resp.json())["reason"] == "NotFound"


async def test_kubelet_registers_its_ready_node(sim: KubeSim, clock: FakeClock) -> None:
    nodes = sim.cluster.registry.by_kind("v1", "Node")
    assert nodes is not None
    await clock.settle()
    node = sim.cluster.get(nodes, None, sim.settings.node_name)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == sim.settings.node_name
    await make_pod(sim, "p", {})
    await clock.advance(1)
    pod = get_pod(sim, "p")
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["nodeName"] == node["metadata"]["name"]
    assert pod["status"]["hostIP"] == node["status"]["addresses"][0]["address"]


# --- init containers ------------------------------------------------------------------------------


def init_container(name: str, *, sidecar: bool = False) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **({"restartPolicy": "Always"} if sidecar else {})}


def printed_status(sim: KubeSim, pod: dict[str, Any]) -> str:
    """The STATUS column `kubectl get pods` shows (the Table the API server renders)."""
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    return str(table.cells(pods, pod, datetime.now(UTC))[2])


def init_state(pod: dict[str, Any], index: int = 0) -> str:
    return str(next(iter(pod["status"]["initContainerStatuses"][index]["state"])))


async def test_init_containers_run_in_order_then_the_pod_gets_ready(
    sim: KubeSim, clock: FakeClock
) -> None:
    await make_pod(
        sim,
        "p",
        {"kubesim/start-seconds": "5", "kubesim/init-seconds": "10", "kubesim/ready-seconds": "5"},
        initContainers=[init_container("setup"), init_container("warm")],
    )

    def row() -> tuple[str, str, str, str, str]:
        pod = get_pod(sim, "p")
        return (
            pod["status"]["phase"],
            printed_status(sim, pod),
            init_state(pod, 0),
            init_state(pod, 1),
            str(condition(pod, "Initialized")),
        )

    # The sandbox takes start-seconds (5), each init container init-seconds (10), then ready-seconds
    # (5).
    seen = [row()]
    for step in (5, 10, 10):
        await clock.advance(step)
        seen.append(row())
    assert seen == [
        ("Pending", "Init:0/2", "waiting", "waiting", "False"),
        ("Pending", "Init:0/2", "running", "waiting", "False"),
        ("Pending", "Init:1/2", "terminated", "running", "False"),
        ("Running", "Running", "terminated", "terminated", "True"),
    ]
    await clock.advance(5 - JUST)
    assert condition(get_pod(sim, "p"), "Ready") == "False"
    await clock.advance(JUST)
    assert condition(get_pod(sim, "p"), "Ready") == "True"
    pod = get_pod(sim, "p")
    first, second = (s["state"]["terminated"] for s in pod["status"]["initContainerStatuses"])
    assert (first["exitCode"], first["reason"]) == (0, "Completed")
    assert first["finishedAt"] <= second["startedAt"]
    assert container(pod)["state"]["running"]["startedAt"] >= second["finishedAt"]


async def test_default_init_seconds_are_a_tenth_of_a_simulated_second(
    sim: KubeSim, clock: FakeClock
) -> None:
    await make_pod(
        sim, "p", {"kubesim/start-seconds": "0"}, initContainers=[init_container("setup")]
    )
    await clock.advance(0.1 - JUST)
    assert get_pod(sim, "p")["status"]["phase"] == "Pending"
    await clock.advance(JUST)
    assert get_pod(sim, "p")["status"]["phase"] == "Running"
    rt = kubelet(sim).runtime("default", "p")
    assert rt is not None
    (run,) = rt.init_runs
    assert run.finished_at == pytest.approx(run.started_at + 0.1)


@pytest.mark.parametrize(
    ("policy", "phase", "printed"),
    [
        ("Never", "Failed", "Init:Error"),
        ("OnFailure", "Pending", "Init:0/1"),
        ("Always", "Pending", "Init:0/1"),
    ],
    ids=["never-fails-the-pod", "onfailure-restarts-it", "always-restarts-it"],
)
async def test_failing_init_container(
    sim: KubeSim, clock: FakeClock, policy: str, phase: str, printed: str
) -> None:
    await make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "5", "kubesim/init-exit-code": "2"},
        policy=policy,
        initContainers=[init_container("setup")],
    )

    # Started at 1, the init container fails at 6 and, when restarted in place, again at 11.
    await clock.advance(1 + 5 + 5)
    pod = get_pod(sim, "p")
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["restartCount"] == (0 if policy == "Never" else 2)
    assert (pod["status"]["phase"], printed_status(sim, pod)) == (phase, printed)
    exited = init["state"].get("terminated") or init["lastState"]["terminated"]
    assert (exited["exitCode"], exited["reason"]) == (2, "Error")
    assert container(pod)["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(pod, "Initialized") == "False"


async def test_sidecar_init_container_keeps_running_beside_the_app(
    sim: KubeSim, clock: FakeClock
) -> None:
    await make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "5"},
        policy="Always",
        initContainers=[init_container("proxy", sidecar=True), init_container("setup")],
    )
    await clock.advance(1 + 5 + 1)
    pod = get_pod(sim, "p")
    assert condition(pod, "Ready") == "True"
    assert [init_state(pod, i) for i in (0, 1)] == ["running", "terminated"]
    proxy = pod["status"]["initContainerStatuses"][0]
    assert (proxy["started"], proxy["ready"]) == (True, True)
    assert printed_status(sim, pod) == "Running"


async def test_pod_deleted_during_init_is_stopped_and_removed(
    sim: KubeSim, clock: FakeClock
) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await make_pod(
        sim,
        "p",
        {"kubesim/init-seconds": "1000", "kubesim/termination-seconds": "5"},
        initContainers=[init_container("setup")],
    )
    await clock.advance(1)
    assert init_state(get_pod(sim, "p")) == "running"
    sim.cluster.delete(pods, "default", "p")
    await clock.advance(5 - JUST)
    assert init_state(get_pod(sim, "p")) == "running"
    await clock.advance(JUST)
    assert not sim.cluster.list(pods, "default")["items"]
    assert kubelet(sim).runtime("default", "p") is None


async def test_the_kubelet_does_not_queue_a_pod_again_for_its_own_status_writes(
    sim: KubeSim, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = kubelet(sim)._queue
    queued: list[Any] = []
    add = queue.add

    def counting_add(key: Any) -> None:
        queued.append(key)
        add(key)

    monkeypatch.setattr(queue, "add", counting_add)
    await make_pod(sim, "own-writes", {})
    await clock.advance(2.0)  # Running after 1 s, Ready after 2 s: three status writes in all
    assert condition(get_pod(sim, "own-writes"), "Ready") == "True"
    # Queued when created and when each timer is due; the writes themselves queue nothing.
    assert queued == [("default", "own-writes")] * 3
