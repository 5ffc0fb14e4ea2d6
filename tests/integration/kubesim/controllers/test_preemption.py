"""Preemption by the default scheduler, over HTTP on the fake clock: the lowest-priority victims on
one node are marked DisruptionTarget and then deleted gracefully, the preemptor is nominated and
bound once they are gone, a lower-priority pod does not take the room meanwhile, and
`preemptionPolicy: Never` never preempts."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.nodes import NodeShape
from kubesim.registry import ResourceType
from kubesim.settings import SimSettings

SHAPES = tuple(
    NodeShape(f"kubesim-{i}", {"cpu": "4", "memory": "8Gi", "pods": "110"}) for i in (1, 2)
)
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, nodes=SHAPES)


async def create_classes(http: aiohttp.ClientSession) -> None:
    for name, value in (("low", 1), ("mid", 50), ("high", 100)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        async with http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=body) as resp:
            assert resp.status == 201, await resp.text()


async def create_pod(
    http: aiohttp.ClientSession,
    name: str,
    cpu: str,
    priority_class: str,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> None:
    requests = {"cpu": cpu}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "priorityClassName": priority_class,
            "containers": [
                {
                    "name": "main",
                    "image": "example/main:1",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
            **spec,
        },
    }
    async with http.post(PODS, json=body) as resp:
        assert resp.status == 201, await resp.text()


async def get_pod(http: aiohttp.ClientSession, name: str) -> dict[str, Any] | None:
    async with http.get(f"{PODS}/{name}") as resp:
        if resp.status == 404:
            return None
        assert resp.status == 200
        pod: dict[str, Any] = await resp.json()
        return pod


async def events(http: aiohttp.ClientSession, name: str, reason: str) -> list[dict[str, Any]]:
    async with http.get("/api/v1/namespaces/default/events") as resp:
        items: list[dict[str, Any]] = (await resp.json())["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == kind), None)


async def test_the_lowest_priority_victims_on_one_node_make_room(
    sim: KubeSim, sim_http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    await create_classes(sim_http)
    # kubesim-1: two low pods of 2 cpu each; kubesim-2: one mid pod of 4 cpu.
    await create_pod(sim_http, "low-a", "2", "low")
    await create_pod(sim_http, "mid", "4", "mid")
    await create_pod(sim_http, "low-b", "2", "low")
    await clock.advance(5.0)  # all running: a victim then takes its grace period to go
    placed = {
        n: (await get_pod(sim_http, n) or {})["spec"].get("nodeName")
        for n in ("low-a", "low-b", "mid")
    }
    assert placed == {"low-a": "kubesim-1", "low-b": "kubesim-1", "mid": "kubesim-2"}

    seen: list[tuple[str, bool, bool]] = []

    def record(
        event: str, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and obj["metadata"]["name"].startswith("low-"):
            marked = condition(obj, "DisruptionTarget") is not None
            seen.append(
                (obj["metadata"]["name"], marked, bool(obj["metadata"].get("deletionTimestamp")))
            )

    sim.cluster.add_listener(record)
    await create_pod(sim_http, "high", "2", "high")
    await clock.settle()

    high = await get_pod(sim_http, "high")
    assert high is not None
    assert high["spec"].get("nodeName") is None
    assert high["status"]["nominatedNodeName"] == "kubesim-1"
    scheduled = condition(high, "PodScheduled")
    assert scheduled is not None
    # Preemption found victims: the message has no `preemption:` part.
    assert scheduled["message"] == "0/2 nodes are available: 2 Insufficient cpu."

    # One victim only (2 cpu is enough), the later-created of the two equal ones being no more
    # important: whichever it is, it was marked before its deletion began.
    victims = [
        n
        for n in ("low-a", "low-b")
        if (p := await get_pod(sim_http, n)) and p["metadata"].get("deletionTimestamp")
    ]
    assert len(victims) == 1
    [victim] = victims
    pod = await get_pod(sim_http, victim)
    assert pod is not None
    target = condition(pod, "DisruptionTarget")
    assert target is not None
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod",
    )
    mine = [s for s in seen if s[0] == victim]
    assert mine[0] == (victim, True, False)
    assert (victim, True, True) in mine
    [preempted] = await events(sim_http, victim, "Preempted")
    assert preempted["message"] == f"Preempted by pod {high['metadata']['uid']} on node kubesim-1"
    assert preempted["type"] == "Normal"

    # A lower-priority pod arriving meanwhile does not take the room being freed.
    await create_pod(sim_http, "sneaky", "2", "low")
    await clock.settle()
    await clock.advance(31.0)  # the victim's grace period
    assert await get_pod(sim_http, victim) is None
    await clock.advance(10.0)
    high = await get_pod(sim_http, "high")
    assert high is not None
    assert high["spec"]["nodeName"] == "kubesim-1"
    sneaky = await get_pod(sim_http, "sneaky")
    assert sneaky is not None
    assert sneaky["spec"].get("nodeName") is None


async def test_preemption_policy_never_never_preempts(
    sim_http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    await create_classes(sim_http)
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "polite"},
        "value": 1000,
        "preemptionPolicy": "Never",
    }
    async with sim_http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=body) as resp:
        assert resp.status == 201
    for name in ("low-a", "low-b"):
        await create_pod(sim_http, name, "4", "low")
    await create_pod(sim_http, "polite", "1", "polite")
    await clock.advance(5.0)
    for name in ("low-a", "low-b"):
        pod = await get_pod(sim_http, name)
        assert pod is not None
        assert not pod["metadata"].get("deletionTimestamp")
    polite = await get_pod(sim_http, "polite")
    assert polite is not None
    assert "nominatedNodeName" not in polite["status"]
    scheduled = condition(polite, "PodScheduled")
    assert scheduled is not None
    assert scheduled["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_nothing_to_preempt_says_why(
    sim_http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    await create_classes(sim_http)
    await create_pod(sim_http, "high-a", "4", "high")
    await create_pod(sim_http, "mid-a", "4", "mid")
    await clock.advance(5.0)
    await create_pod(sim_http, "huge", "6", "high")
    await clock.settle()
    huge = await get_pod(sim_http, "huge")
    assert huge is not None
    scheduled = condition(huge, "PodScheduled")
    assert scheduled is not None
    # kubesim-1 holds only a pod of the same priority; kubesim-2 emptied still has 4 cpu, not 6.
    assert scheduled["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "1 Insufficient cpu, 1 No preemption victims found for incoming pod."
    )
    assert "nominatedNodeName" not in huge["status"]
    mid = await get_pod(sim_http, "mid-a")
    assert mid is not None
    assert not mid["metadata"].get("deletionTimestamp")


async def test_a_burst_of_preemptions_spends_each_budget_once(
    sim: KubeSim, sim_http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    """Two jobs' pods on each node, each job's budget allowing one disruption, and two preemptors
    at once: the second sees the budget the first one spent, so each job loses one pod."""
    await create_classes(sim_http)
    for job in ("c", "a"):  # a's pods start later: the less important, the first victims
        for i, node in enumerate(("kubesim-1", "kubesim-2")):
            await create_pod(sim_http, f"{job}-{i}", "2", "low", nodeName=node, labels={"job": job})
        await clock.advance(2.0)
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": job},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"job": job}}},
        }
        async with sim_http.post(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets", json=budget
        ) as resp:
            assert resp.status == 201, await resp.text()
    await clock.advance(5.0)
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    for name in ("high-1", "high-2"):  # in one turn of the loop: queued together
        requests = {"cpu": "2"}
        container = {"name": "m", "image": "i", "resources": {"requests": requests}}
        spec = {"priorityClassName": "high", "containers": [container]}
        sim.cluster.create(pods, "default", {"metadata": {"name": name}, "spec": spec})
    await clock.settle()
    victims = [
        n
        for n in ("a-0", "a-1", "c-0", "c-1")
        if (p := await get_pod(sim_http, n)) and p["metadata"].get("deletionTimestamp")
    ]
    assert [v[0] for v in victims] == ["a", "c"], victims
