"""The default scheduler on a shaped cluster, on the fake clock: placement by requests, selectors,
affinity, taints and cordon; an unschedulable pod's condition, event and message; its retry when
capacity frees; deterministic spreading; and the default cluster binding every pod at once."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import DeleteOptions
from kubesim.controllers.scheduler import Scheduler
from kubesim.nodes import NodeShape, Taint
from kubesim.settings import SimSettings

GPU = "nvidia.com/gpu"
SHAPES = (
    NodeShape(
        "kubesim-1", {"cpu": "4", "memory": "8Gi", GPU: "2", "pods": "110"}, labels={"zone": "a"}
    ),
    NodeShape(
        "kubesim-2", {"cpu": "4", "memory": "8Gi", GPU: "2", "pods": "110"}, labels={"zone": "b"}
    ),
    NodeShape(
        "kubesim-3",
        {"cpu": "4", "memory": "8Gi", "pods": "110"},
        labels={"zone": "b"},
        taints=(Taint("dedicated", "NoSchedule", "infra"),),
    ),
)


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=SHAPES)


def pod(name: str, requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "example/main:1"}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **spec},
    }


def create(sim: KubeSim, body: dict[str, Any]) -> None:
    sim.cluster.create(builtins.PODS, "default", body)


def get(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(builtins.PODS, "default", name)


def node_of(sim: KubeSim, name: str) -> str | None:
    node = get(sim, name)["spec"].get("nodeName")
    return None if node is None else str(node)


def scheduled_condition(sim: KubeSim, name: str) -> dict[str, Any]:
    conditions = get(sim, name)["status"].get("conditions") or []
    return next(c for c in conditions if c["type"] == "PodScheduled")


def events(sim: KubeSim, name: str, reason: str) -> list[dict[str, Any]]:
    items = sim.cluster.list(builtins.EVENTS, "default")["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def scheduler(sim: KubeSim) -> Scheduler:
    assert sim.controllers.scheduler is not None
    return sim.controllers.scheduler


async def test_a_gpu_pod_waits_on_a_full_cluster_and_runs_once_a_gpu_frees(
    sim: KubeSim, clock: FakeClock
) -> None:
    for name in ("a", "b", "c", "d"):
        create(sim, pod(name, {GPU: "1"}))
    await clock.settle()
    assert sorted(node_of(sim, n) or "" for n in "abcd") == ["kubesim-1"] * 2 + ["kubesim-2"] * 2

    create(sim, pod("late", {GPU: "1"}))
    await clock.settle()
    message = (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
        "2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
        "1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming "
        "pod."
    )
    condition = scheduled_condition(sim, "late")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        message,
    )
    assert get(sim, "late")["status"]["phase"] == "Pending"
    [failed] = events(sim, "late", "FailedScheduling")
    assert (failed["type"], failed["message"], failed["reportingComponent"]) == (
        "Warning",
        message,
        "default-scheduler",
    )

    # Retries on a change that cannot help (a new pod elsewhere) aggregate into the same event.
    create(sim, pod("other-unschedulable", {GPU: "9"}))
    await clock.settle()
    assert ("default", "late") in scheduler(sim).unschedulable

    freed = node_of(sim, "a")
    sim.cluster.delete(builtins.PODS, "default", "a", options=DeleteOptions(grace_period_seconds=0))
    await clock.advance(1.0)  # the back-off of one failed attempt
    assert node_of(sim, "late") == freed
    assert scheduled_condition(sim, "late")["status"] == "True"
    [scheduled] = events(sim, "late", "Scheduled")
    assert scheduled["message"] == f"Successfully assigned default/late to {freed}"
    await clock.advance(2.0)
    assert get(sim, "late")["status"]["phase"] == "Running"


async def test_the_failed_scheduling_event_is_aggregated_and_back_off_grows(
    sim: KubeSim, clock: FakeClock
) -> None:
    create(sim, pod("huge", {"cpu": "100"}))
    await clock.settle()
    for _ in range(4):
        # A node change that could help: each one retries the pod after its back-off.
        node = sim.cluster.get(builtins.NODES, None, "kubesim-1")
        node["metadata"].setdefault("labels", {})["touched"] = str(clock.now())
        sim.cluster.update(builtins.NODES, None, "kubesim-1", node)
        await clock.advance(10.0)
    [failed] = events(sim, "huge", "FailedScheduling")
    assert failed["series"]["count"] == 5
    assert scheduler(sim)._attempts[("default", "huge")][0] == 5


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"nodeSelector": {"zone": "a"}}, "kubesim-1"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["kubesim-2"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "kubesim-2",
        ),
        (
            {
                "nodeSelector": {"zone": "b"},
                "tolerations": [
                    {
                        "key": "dedicated",
                        "operator": "Equal",
                        "value": "infra",
                        "effect": "NoSchedule",
                    }
                ],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "NotIn",
                                            "values": ["kubesim-2"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "kubesim-3",
        ),
    ],
    ids=["node-selector", "match-fields", "toleration-and-affinity"],
)
async def test_selectors_affinity_and_taints_decide_placement(
    sim: KubeSim, clock: FakeClock, spec: dict[str, Any], expected: str
) -> None:
    create(sim, pod("p", {"cpu": "1"}, **spec))
    await clock.settle()
    assert node_of(sim, "p") == expected


async def test_a_cordoned_node_takes_no_new_pods_until_uncordoned(
    sim: KubeSim, clock: FakeClock
) -> None:
    for name in ("kubesim-1", "kubesim-2"):
        node = sim.cluster.get(builtins.NODES, None, name)
        node["spec"]["unschedulable"] = True
        sim.cluster.update(builtins.NODES, None, name, node)
    create(sim, pod("p", {"cpu": "1"}))
    await clock.settle()
    assert node_of(sim, "p") is None
    assert scheduled_condition(sim, "p")["message"].startswith(
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
        "2 node(s) were unschedulable."
    )
    node = sim.cluster.get(builtins.NODES, None, "kubesim-2")
    node["spec"]["unschedulable"] = False
    sim.cluster.update(builtins.NODES, None, "kubesim-2", node)
    await clock.advance(1.0)
    assert node_of(sim, "p") == "kubesim-2"


async def test_least_allocated_spreads_pods_the_same_way_every_time(
    sim: KubeSim, clock: FakeClock
) -> None:
    placements = []
    for i in range(4):
        create(sim, pod(f"p{i}", {"cpu": "1", "memory": "1Gi"}))
        await clock.settle()
        placements.append(node_of(sim, f"p{i}"))
    # kubesim-3 is tainted; the two others take turns, the emptier first, ties by name.
    assert placements == ["kubesim-1", "kubesim-2", "kubesim-1", "kubesim-2"]
    usage = scheduler(sim).usage("kubesim-1")
    assert usage is not None
    assert (usage.pods, usage.requested["cpu"]) == (2, 2000)


async def test_a_user_set_node_name_bypasses_the_scheduler(sim: KubeSim, clock: FakeClock) -> None:
    create(sim, pod("pinned", {GPU: "1"}, nodeName="kubesim-3"))
    create(sim, pod("nowhere", nodeName="no-such-node"))
    await clock.advance(2.0)
    assert get(sim, "pinned")["status"]["phase"] == "Running"
    assert get(sim, "nowhere")["status"]["phase"] == "Pending"
    assert events(sim, "pinned", "FailedScheduling") == []


async def test_the_binding_subresource_binds_once(sim: KubeSim, clock: FakeClock) -> None:
    create(sim, pod("other", schedulerName="my-scheduler"))
    await clock.settle()
    assert node_of(sim, "other") is None  # another scheduler's pod: left alone
    sim.cluster.bind(builtins.PODS, "default", "other", "kubesim-2")
    assert node_of(sim, "other") == "kubesim-2"
    with pytest.raises(Exception, match='already assigned to node "kubesim-2"'):
        sim.cluster.bind(builtins.PODS, "default", "other", "kubesim-1")


class TestDefaultCluster:
    @pytest.fixture
    def kubesim_settings(self, clock: FakeClock) -> SimSettings:
        return SimSettings(clock=clock)

    async def test_every_pod_is_bound_as_it_is_created(
        self, sim: KubeSim, clock: FakeClock
    ) -> None:
        for i in range(20):
            create(sim, pod(f"p{i}", {GPU: "8", "cpu": "64"}))
            assert node_of(sim, f"p{i}") == "kubesim-node"
        assert scheduler(sim).unschedulable == {}

    async def test_a_pod_that_fails_a_filter_there_is_left_to_the_scheduler(
        self, sim: KubeSim, clock: FakeClock
    ) -> None:
        node = sim.cluster.get(builtins.NODES, None, "kubesim-node")
        node["spec"]["unschedulable"] = True
        sim.cluster.update(builtins.NODES, None, "kubesim-node", node)
        create(sim, pod("picky"))
        await clock.settle()
        assert node_of(sim, "picky") is None
        assert scheduled_condition(sim, "picky")["message"] == (
            "0/1 nodes are available: 1 node(s) were unschedulable. "
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
        node = sim.cluster.get(builtins.NODES, None, "kubesim-node")
        node["spec"]["unschedulable"] = False
        sim.cluster.update(builtins.NODES, None, "kubesim-node", node)
        await clock.advance(1.0)
        assert node_of(sim, "picky") == "kubesim-node"

    async def test_its_one_node_takes_a_pod_whatever_pool_it_selects(
        self, sim: KubeSim, clock: FakeClock
    ) -> None:
        """The default cluster stands for room for every pod: a nodeSelector or a required affinity
        that names a pool (as Kueue's flavours or a GPU pool do) finds it there, as before nodes."""
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        }
        create(sim, pod("selective", nodeSelector={"zone": "z"}, affinity=affinity))
        await clock.settle()
        assert node_of(sim, "selective") == "kubesim-node"


GANGS = {
    "coscheduling": ("scheduling.x-k8s.io", "v1alpha1", "scheduler-plugins-scheduler"),
    "volcano": ("scheduling.volcano.sh", "v1beta1", "volcano"),
}


def pod_group_crd(group: str, version: str) -> dict[str, Any]:
    """The PodGroup CRD as a gang scheduler's installation brings it (free-form here)."""
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object", "properties": {"spec": free, "status": free}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def install_gang(sim: KubeSim, gang: str, min_member: int, **spec: Any) -> Any:
    """The PodGroup CRD and a PodGroup `g`; returns its resource type."""
    group, version, _ = GANGS[gang]
    sim.cluster.create(builtins.CRDS, None, pod_group_crd(group, version))
    rt = sim.cluster.registry.by_plural(group, version, "podgroups")
    assert rt is not None
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": min_member, **spec},
    }
    sim.cluster.create(rt, "default", body)
    return rt


def gang_pod(gang: str, name: str, cpu: str) -> dict[str, Any]:
    body = pod(name, {"cpu": cpu}, schedulerName=GANGS[gang][2])
    if gang == "volcano":
        body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "g"}
    else:
        body["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
    return body


@pytest.mark.parametrize("gang", list(GANGS))
async def test_a_gang_is_bound_all_or_nothing(sim: KubeSim, clock: FakeClock, gang: str) -> None:
    rt = install_gang(sim, gang, 4)
    create(sim, pod("blocker", {"cpu": "2"}))  # kubesim-1 and -2 have room for 3 more of 2 cpu
    await clock.settle()
    for i in range(3):
        create(sim, gang_pod(gang, f"w{i}", "2"))
    await clock.settle()
    # Fewer pods than minMember: all wait.
    assert [node_of(sim, f"w{i}") for i in range(3)] == [None] * 3
    if gang == "coscheduling":
        assert scheduled_condition(sim, "w0")["message"] == (
            "0/3 nodes are available: pre-filter pod w0 cannot find enough sibling pods, "
            "current pods number: 3, minMember of group: 4."
        )
    create(sim, gang_pod(gang, "w3", "2"))
    await clock.advance(2.0)
    # Four pods, room for three: none is bound.
    assert [node_of(sim, f"w{i}") for i in range(4)] == [None] * 4
    messages = {scheduled_condition(sim, f"w{i}")["message"] for i in range(4)}
    if gang == "volcano":
        assert messages == {
            "1/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
            "Pending: 1 Unschedulable, 3 Schedulable"
        }
        assert sim.cluster.get(rt, "default", "g")["status"]["phase"] == "Inqueue"
    else:
        assert messages == {
            "rejected due to timeout after waiting 60s at plugin Coscheduling",
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, "
            "2 Insufficient cpu.",
        }
        assert sim.cluster.get(rt, "default", "g")["status"]["phase"] == "Scheduling"

    sim.cluster.delete(
        builtins.PODS, "default", "blocker", options=DeleteOptions(grace_period_seconds=0)
    )
    await clock.advance(10.0)
    nodes = [node_of(sim, f"w{i}") for i in range(4)]
    assert sorted(n or "" for n in nodes) == ["kubesim-1"] * 2 + ["kubesim-2"] * 2
    await clock.advance(5.0)
    assert sim.cluster.get(rt, "default", "g")["status"]["phase"] == "Running"
    assert sim.cluster.get(rt, "default", "g")["status"]["running"] == 4


async def test_a_gang_pod_without_its_scheduler_stays_pending(
    sim: KubeSim, clock: FakeClock
) -> None:
    # No PodGroup CRD: neither gang scheduler is installed.
    create(sim, gang_pod("volcano", "v", "1"))
    create(sim, gang_pod("coscheduling", "c", "1"))
    await clock.advance(5.0)
    for name in ("v", "c"):
        assert node_of(sim, name) is None
        assert get(sim, name)["status"].get("conditions") is None
        assert events(sim, name, "FailedScheduling") == []


async def test_a_coscheduling_group_waits_for_its_pod_group_and_min_resources(
    sim: KubeSim, clock: FakeClock
) -> None:
    group, version, _ = GANGS["coscheduling"]
    sim.cluster.create(builtins.CRDS, None, pod_group_crd(group, version))
    create(sim, gang_pod("coscheduling", "a", "1"))
    await clock.settle()
    assert scheduled_condition(sim, "a")["message"] == "PodGroup not found"
    rt = sim.cluster.registry.by_plural(group, version, "podgroups")
    assert rt is not None
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 1, "minResources": {"cpu": "13"}},
    }
    sim.cluster.create(rt, "default", body)
    await clock.advance(2.0)
    assert node_of(sim, "a") is None
    assert scheduled_condition(sim, "a")["message"] == (
        "0/3 nodes are available: resource gap: cpu=1000."
    )
    body = sim.cluster.get(rt, "default", "g")
    body["spec"] = {"minMember": 1, "minResources": {"cpu": "2"}}
    sim.cluster.update(rt, "default", "g", body)
    await clock.advance(2.0)
    assert node_of(sim, "a") is not None
