"""PodDisruptionBudgets over HTTP: the disruption controller's status and the Eviction API's budget
check.

On the fake clock (conftest.py): pods start 1 simulated second after they are created and are ready
1 s later, so `settle(2)` makes every pod created before it Ready.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
import yaml

from kubesim import pdb
from kubesim.app import KubeSim, sync_stats
from kubesim.clock import FakeClock
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl

from .controller_helpers import rt

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


async def settle(sim: KubeSim, seconds: float = 0.0) -> None:
    clock = sim.controllers.clock
    assert isinstance(clock, FakeClock)
    if seconds:
        await clock.advance(seconds)
    await clock.settle()


def create_pod(sim: KubeSim, name: str, labels: dict[str, str], **meta: Any) -> None:
    body = {
        "metadata": {"name": name, "labels": labels, **meta},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), "default", body)


def create_budget(sim: KubeSim, name: str, app: str, **spec: Any) -> None:
    body = {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}
    sim.cluster.create(rt(sim, "policy/v1", "PodDisruptionBudget"), "default", body)


def budget_status(sim: KubeSim, name: str) -> dict[str, Any]:
    status: dict[str, Any] = sim.cluster.get(
        rt(sim, "policy/v1", "PodDisruptionBudget"), "default", name
    )["status"]
    return status


def pod(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(rt(sim, "v1", "Pod"), "default", name)


def counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        status["expectedPods"],
        status["currentHealthy"],
        status["desiredHealthy"],
        status["disruptionsAllowed"],
    )


def allowed_condition(status: dict[str, Any]) -> tuple[str, str]:
    (condition,) = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    return condition["status"], condition["reason"]


async def evict(
    http: aiohttp.ClientSession, name: str, query: str = ""
) -> tuple[int, dict[str, Any]]:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    async with http.post(
        f"/api/v1/namespaces/default/pods/{name}/eviction{query}", json=body
    ) as response:
        answer: dict[str, Any] = await response.json()
        return response.status, answer


async def three_ready_pods_and_budget(sim: KubeSim, **spec: Any) -> None:
    for i in range(3):
        create_pod(sim, f"a-{i}", {"app": "a"})
    create_budget(sim, "budget", "a", **spec)
    await settle(sim, 2)


async def test_the_status_follows_pods_becoming_ready_and_going(sim: KubeSim) -> None:
    create_budget(sim, "budget", "a", minAvailable=2)
    await settle(sim)
    assert counts(budget_status(sim, "budget")) == (0, 0, 2, 0)
    assert budget_status(sim, "budget")["observedGeneration"] == 1
    for i in range(3):
        create_pod(sim, f"a-{i}", {"app": "a"})
    create_pod(sim, "other", {"app": "b"})
    await settle(sim)
    assert counts(budget_status(sim, "budget")) == (3, 0, 2, 0)
    await settle(sim, 2)
    ready = budget_status(sim, "budget")
    assert counts(ready) == (3, 3, 2, 1)
    assert allowed_condition(ready) == ("True", "SufficientPods")
    sim.cluster.delete(rt(sim, "v1", "Pod"), "default", "a-0")
    await settle(sim)
    gone = budget_status(sim, "budget")
    assert counts(gone) == (3, 2, 2, 0), "a terminating pod is not healthy"
    assert allowed_condition(gone) == ("False", "InsufficientPods")


async def test_percentages_and_max_unavailable_count_the_controllers_scale(sim: KubeSim) -> None:
    deployments = rt(sim, "apps/v1", "Deployment")
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "m", "image": "b"}]},
    }
    spec = {"replicas": 4, "selector": {"matchLabels": {"app": "a"}}, "template": template}
    deployment = sim.cluster.create(
        deployments, "default", {"metadata": {"name": "d"}, "spec": spec}
    ).object
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "d",
        "uid": deployment["metadata"]["uid"],
        "controller": True,
    }
    for i in range(3):
        create_pod(sim, f"a-{i}", {"app": "a"}, ownerReferences=[owner])
    create_budget(sim, "budget", "a", maxUnavailable="50%")
    await settle(sim, 2)
    assert counts(budget_status(sim, "budget")) == (4, 3, 2, 1)
    sim.cluster.patch(
        deployments, "default", "d", b'{"spec":{"replicas":2}}', "application/merge-patch+json"
    )
    await settle(sim)
    assert counts(budget_status(sim, "budget")) == (2, 3, 1, 2)


async def test_a_controllers_status_writes_resync_no_budget(sim: KubeSim) -> None:
    """An owner's status writes leave `expectedPods` as it was, and its scale is only its pods'
    budgets' business: at scale, each MPIJob status write re-synced every budget (200 x 200)."""
    deployments = rt(sim, "apps/v1", "Deployment")
    template = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "m", "image": "b"}]},
    }
    spec = {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}, "template": template}
    body = {"metadata": {"name": "d"}, "spec": spec}
    uid = sim.cluster.create(deployments, "default", body).object["metadata"]["uid"]
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": uid}
    for i in range(2):
        create_pod(sim, f"a-{i}", {"app": "a"}, ownerReferences=[owner | {"controller": True}])
    create_pod(sim, "b-0", {"app": "b"})
    create_budget(sim, "over-a", "a", maxUnavailable=1)
    create_budget(sim, "over-b", "b", maxUnavailable=1)
    await settle(sim, 2)

    def syncs() -> float:
        return sync_stats(sim.controllers.clock)["disruption-controller"]["syncs"]

    before = syncs()
    for generation in range(5):
        status = {"status": {"observedGeneration": generation + 1}}
        sim.cluster.patch(
            deployments,
            "default",
            "d",
            json.dumps(status).encode(),
            "application/merge-patch+json",
            subresource="status",
        )
        await settle(sim)
    assert syncs() == before
    sim.cluster.patch(
        deployments, "default", "d", b'{"spec":{"replicas":3}}', "application/merge-patch+json"
    )
    await settle(sim)
    # The budget over the deployment's pods, and once more for its own status write; not over-b.
    assert syncs() == before + 2
    assert counts(budget_status(sim, "over-a"))[0] == 3


async def test_a_pod_change_tries_only_the_budgets_its_labels_could_match(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One budget per job, as the operator makes them: a pod's change costs the budgets that could
    select it, and a sync the pods its budget selects, not every budget and every pod."""
    for i in range(30):
        create_pod(sim, f"p-{i}", {"app": f"a{i}"})
        create_budget(sim, f"b-{i}", f"a{i}", minAvailable=1)
    await settle(sim, 2)
    calls: list[str] = []
    selects = pdb.selects

    def counted(budget: dict[str, Any], labels: dict[str, str]) -> bool:
        calls.append(budget["metadata"]["name"])
        return selects(budget, labels)

    monkeypatch.setattr(pdb, "selects", counted)
    create_pod(sim, "p-7-bis", {"app": "a7"})
    await settle(sim, 2)
    assert set(calls) == {"b-7"}, calls
    assert counts(budget_status(sim, "b-7")) == (2, 2, 1, 1)
    sim.cluster.delete(rt(sim, "v1", "Pod"), "default", "p-7")
    await settle(sim, 10)
    assert counts(budget_status(sim, "b-7"))[:2] == (1, 1), "the deleted pod left the budget"


async def test_an_eviction_beyond_the_budget_is_a_429_with_the_budget_as_cause(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    await three_ready_pods_and_budget(sim, minAvailable=3)
    code, answer = await evict(sim_http, "a-0")
    assert code == 429
    assert answer["reason"] == "TooManyRequests"
    assert answer["message"] == VIOLATION
    assert answer["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget budget needs 3 healthy pods and has 3 currently",
        }
    ]
    assert "deletionTimestamp" not in pod(sim, "a-0")["metadata"]


async def test_an_eviction_within_the_budget_marks_the_pod_and_spends_the_budget(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    await three_ready_pods_and_budget(sim, minAvailable=2)
    code, answer = await evict(sim_http, "a-0")
    assert (code, answer["status"]) == (201, "Success")
    evicted = pod(sim, "a-0")
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 5
    (target,) = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    spent = budget_status(sim, "budget")
    assert spent["disruptionsAllowed"] == 0
    assert set(spent.get("disruptedPods") or {}) <= {"a-0"}
    code, answer = await evict(sim_http, "a-1")
    assert (code, answer["message"]) == (429, VIOLATION)
    await settle(sim)
    after = budget_status(sim, "budget")
    assert counts(after) == (3, 2, 2, 0)
    assert "disruptedPods" not in after, "the controller drops a pod once it is being deleted"


async def test_pending_and_finished_pods_are_evicted_without_a_budget_check(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    create_budget(sim, "budget", "a", minAvailable=5)
    create_pod(sim, "pending", {"app": "a"})
    code, _ = await evict(sim_http, "pending")
    assert code == 201
    assert budget_status(sim, "budget")["disruptionsAllowed"] == 0


async def test_a_pod_under_two_budgets_cannot_be_evicted(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    await three_ready_pods_and_budget(sim, minAvailable=1)
    create_budget(sim, "second", "a", maxUnavailable=1)
    await settle(sim)
    code, answer = await evict(sim_http, "a-0")
    assert code == 500
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
        "does "
        "not support.",
        "code": 500,
    }


async def test_a_dry_run_eviction_changes_nothing(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    await three_ready_pods_and_budget(sim, minAvailable=2)
    before = budget_status(sim, "budget")
    code, _ = await evict(sim_http, "a-0", "?dryRun=All")
    assert code == 201
    assert "deletionTimestamp" not in pod(sim, "a-0")["metadata"]
    assert budget_status(sim, "budget") == before


async def test_an_unreleased_disruption_stops_counting_after_the_deletion_timeout(
    sim: KubeSim,
) -> None:
    await three_ready_pods_and_budget(sim, minAvailable=1)
    budgets = rt(sim, "policy/v1", "PodDisruptionBudget")
    current = sim.cluster.get(budgets, "default", "budget")
    # As an eviction whose delete never came records it.
    stamp = current["status"]["conditions"][0]["lastTransitionTime"]
    status = {**current["status"], "disruptedPods": {"a-1": stamp}}
    sim.cluster.update(
        budgets, "default", "budget", {**current, "status": status}, subresource="status"
    )
    await settle(sim)
    assert budget_status(sim, "budget")["currentHealthy"] == 2
    await settle(sim, 121)
    assert budget_status(sim, "budget")["currentHealthy"] == 3
    assert "disruptedPods" not in budget_status(sim, "budget")


async def test_kubectl_creates_and_lists_budgets(sim: KubeSim, kubectl: Kubectl) -> None:
    for i in range(2):
        create_pod(sim, f"a-{i}", {"app": "a"})
    rc, out, err = await kubectl("create", "pdb", "budget", "--selector=app=a", "--min-available=1")
    assert rc == 0, err
    assert out.strip() == "poddisruptionbudget.policy/budget created"
    await settle(sim, 2)
    rc, out, err = await kubectl("get", "pdb")
    assert rc == 0, err
    header, row = out.splitlines()
    assert header.split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert row.split()[:4] == ["budget", "1", "N/A", "1"]
    rc, out, err = await kubectl("get", "pdb", "budget", "-o", "yaml")
    assert rc == 0, err
    assert yaml.safe_load(out)["status"]["currentHealthy"] == 2
