"""The simulated garbage collector through the real Cluster: cascades, orphaning, foreground
deletion.

The GC acts on events, never on a period: on the fake clock (conftest.py) every cascade below
completes in `clock.settle()`, with no simulated time passing, except where pods take their
termination time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import DeleteOptions
from kubesim.errors import StatusError
from kubesim.settings import SimSettings

from .controller_helpers import rt


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


def ref(owner: dict[str, Any], *, block: bool = False, controller: bool = False) -> dict[str, Any]:
    out = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        out["blockOwnerDeletion"] = True
    if controller:
        out["controller"] = True
    return out


def configmap(sim: KubeSim, name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = list(owners)
    return sim.cluster.create(rt(sim, "v1", "ConfigMap"), "default", {"metadata": meta}).object


def exists(
    sim: KubeSim, api_version: str, kind: str, name: str, namespace: str | None = "default"
) -> bool:
    try:
        sim.cluster.get(rt(sim, api_version, kind), namespace, name)
    except StatusError as err:
        if err.code != 404:
            raise
        return False
    return True


def names(sim: KubeSim, api_version: str, kind: str) -> list[str]:
    return sorted(
        o["metadata"]["name"]
        for o in sim.cluster.list(rt(sim, api_version, kind), "default")["items"]
    )


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {
            "kind": "Widget",
            "plural": "widgets",
            "singular": "widget",
            "listKind": "WidgetList",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@pytest.mark.parametrize(
    "owner_kind", ["ConfigMap", "Widget"], ids=["configmap-owner", "custom-resource-owner"]
)
async def test_deleting_owner_removes_job_and_its_pods(
    sim: KubeSim, clock: FakeClock, owner_kind: str
) -> None:
    if owner_kind == "Widget":
        sim.cluster.create(
            rt(sim, "apiextensions.k8s.io/v1", "CustomResourceDefinition"), None, CRD
        )
        owner_rt = rt(sim, "example.com/v1", "Widget")
        owner = sim.cluster.create(
            owner_rt, "default", {"metadata": {"name": "owner"}, "spec": {}}
        ).object
    else:
        owner_rt = rt(sim, "v1", "ConfigMap")
        owner = configmap(sim, "owner")
    job = {
        "metadata": {"name": "j", "ownerReferences": [ref(owner, block=True, controller=True)]},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }
    sim.cluster.create(rt(sim, "batch/v1", "Job"), "default", job)
    await clock.advance(2)
    assert len(names(sim, "v1", "Pod")) == 2
    sim.cluster.delete(owner_rt, "default", "owner")
    await clock.settle()
    assert not exists(sim, "batch/v1", "Job", "j")
    # The pods go once the kubelet has stopped them (0.2 simulated seconds by default).
    await clock.advance(0.2)
    assert not names(sim, "v1", "Pod")


async def test_dependents_are_collected_on_the_event_without_waiting(
    sim: KubeSim, clock: FakeClock
) -> None:
    owner = configmap(sim, "owner")
    configmap(sim, "child", ref(owner))
    grandchild_owner = sim.cluster.get(rt(sim, "v1", "ConfigMap"), "default", "child")
    configmap(sim, "grandchild", ref(grandchild_owner))
    await clock.settle()
    assert names(sim, "v1", "ConfigMap") == ["child", "grandchild", "owner"]
    sim.cluster.delete(rt(sim, "v1", "ConfigMap"), "default", "owner")
    await clock.settle()
    assert not names(sim, "v1", "ConfigMap")
    # No timer was involved: the cascade did not wait for any simulated time.
    assert (clock.now(), clock.pending_timers) == (0.0, 0)


async def test_dependent_with_a_live_owner_only_loses_the_dangling_reference(
    sim: KubeSim, clock: FakeClock
) -> None:
    gone = configmap(sim, "gone")
    alive = configmap(sim, "alive")
    configmap(sim, "child", ref(gone), ref(alive))
    sim.cluster.delete(rt(sim, "v1", "ConfigMap"), "default", "gone")

    def refs() -> list[str]:
        child = sim.cluster.get(rt(sim, "v1", "ConfigMap"), "default", "child")
        return [r["name"] for r in child["metadata"].get("ownerReferences", [])]

    await clock.settle()
    assert refs() == ["alive"]


async def test_dependent_created_with_a_missing_owner_is_collected(
    sim: KubeSim, clock: FakeClock
) -> None:
    configmap(
        sim,
        "child",
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "no-such-uid"},
    )
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "child")


async def test_owner_with_same_name_but_other_uid_counts_as_gone(
    sim: KubeSim, clock: FakeClock
) -> None:
    owner = configmap(sim, "owner")
    stale = {**ref(owner), "uid": "an-older-incarnation"}
    configmap(sim, "child", stale)
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "child")
    assert exists(sim, "v1", "ConfigMap", "owner")


async def test_orphan_strips_references_and_keeps_dependents(
    sim: KubeSim, clock: FakeClock
) -> None:
    owner = configmap(sim, "owner")
    configmap(sim, "child", ref(owner))
    sim.cluster.delete(
        rt(sim, "v1", "ConfigMap"),
        "default",
        "owner",
        options=DeleteOptions(propagation_policy="Orphan"),
    )
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "owner")
    child = sim.cluster.get(rt(sim, "v1", "ConfigMap"), "default", "child")
    assert "ownerReferences" not in child["metadata"]


async def test_foreground_waits_for_blocking_dependents(sim: KubeSim, clock: FakeClock) -> None:
    owner = configmap(sim, "owner")
    pods = rt(sim, "v1", "Pod")
    for name, block in (("blocking", True), ("free", False)):
        body = {
            "metadata": {
                "name": name,
                "ownerReferences": [ref(owner, block=block)],
                "annotations": {"kubesim/termination-seconds": "30"},
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        sim.cluster.create(pods, "default", body)
    await clock.advance(1)
    assert all(
        p["status"]["phase"] == "Running" for p in sim.cluster.list(pods, "default")["items"]
    )
    sim.cluster.delete(
        rt(sim, "v1", "ConfigMap"),
        "default",
        "owner",
        options=DeleteOptions(propagation_policy="Foreground"),
    )
    deleting = sim.cluster.get(rt(sim, "v1", "ConfigMap"), "default", "owner")
    assert "foregroundDeletion" in deleting["metadata"]["finalizers"]
    # The pods stop after their 30 simulated seconds of grace: until then the owner must stay.
    await clock.advance(29.9)
    assert exists(sim, "v1", "ConfigMap", "owner")
    assert names(sim, "v1", "Pod") == ["blocking", "free"]
    assert all(
        p["metadata"].get("deletionTimestamp") for p in sim.cluster.list(pods, "default")["items"]
    )
    await clock.advance(0.1)
    assert not exists(sim, "v1", "ConfigMap", "owner")
    assert not names(sim, "v1", "Pod")


async def test_foreground_cascades_recursively(sim: KubeSim, clock: FakeClock) -> None:
    owner = configmap(sim, "owner")
    child = configmap(sim, "child", ref(owner, block=True))
    configmap(sim, "grandchild", ref(child, block=True))
    sim.cluster.delete(
        rt(sim, "v1", "ConfigMap"),
        "default",
        "owner",
        options=DeleteOptions(propagation_policy="Foreground"),
    )
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "owner")
    assert not exists(sim, "v1", "ConfigMap", "child")
    assert not exists(sim, "v1", "ConfigMap", "grandchild")


async def test_cluster_scoped_owner_cascades_to_namespaced_dependents(
    sim: KubeSim, clock: FakeClock
) -> None:
    roles = rt(sim, "rbac.authorization.k8s.io/v1", "ClusterRole")
    owner = sim.cluster.create(
        roles, None, {"metadata": {"name": "owner-role"}, "rules": []}
    ).object
    configmap(sim, "child", ref(owner))
    sim.cluster.delete(roles, None, "owner-role")
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "child")


async def test_dependent_finalizers_are_respected(sim: KubeSim, clock: FakeClock) -> None:
    owner = configmap(sim, "owner")
    cms = rt(sim, "v1", "ConfigMap")
    sim.cluster.create(
        cms,
        "default",
        {
            "metadata": {
                "name": "child",
                "ownerReferences": [ref(owner)],
                "finalizers": ["test/hold"],
            }
        },
    )
    sim.cluster.delete(cms, "default", "owner")
    await clock.settle()
    held = sim.cluster.get(cms, "default", "child")
    assert held["metadata"].get("deletionTimestamp")
    sim.cluster.update(
        cms, "default", "child", {**held, "metadata": {**held["metadata"], "finalizers": []}}
    )
    assert not exists(sim, "v1", "ConfigMap", "child")


@pytest.mark.parametrize("seed", [1, 2, 3, 4], ids=lambda s: f"seed-{s}")
async def test_random_owner_graph_converges(sim: KubeSim, clock: FakeClock, seed: int) -> None:
    """Property: an object survives iff it was not deleted and it had no owners or one owner
    survives."""
    rng = random.Random(seed)
    cms = rt(sim, "v1", "ConfigMap")
    owners_of: dict[int, list[int]] = {}
    created: dict[int, dict[str, Any]] = {}
    for i in range(30):
        owners_of[i] = rng.sample(range(i), k=min(i, rng.choice([0, 1, 1, 2])))
        created[i] = configmap(sim, f"cm-{i}", *(ref(created[o]) for o in owners_of[i]))
    deleted = set(rng.sample(range(30), k=4))
    for i in sorted(deleted):
        sim.cluster.delete(
            cms, "default", f"cm-{i}", options=DeleteOptions(propagation_policy="Background")
        )
    survivors: set[int] = set()
    for i in range(30):
        if i not in deleted and (not owners_of[i] or any(o in survivors for o in owners_of[i])):
            survivors.add(i)
    expected = sorted(f"cm-{i}" for i in survivors)
    await clock.settle()
    assert names(sim, "v1", "ConfigMap") == expected
    # Converged for good: nothing is left to happen later either.
    await clock.advance(3600)
    assert names(sim, "v1", "ConfigMap") == expected


async def test_deleting_a_crd_collects_what_its_objects_owned(
    sim: KubeSim, clock: FakeClock
) -> None:
    crds = rt(sim, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    sim.cluster.create(crds, None, CRD)
    owner = sim.cluster.create(
        rt(sim, "example.com/v1", "Widget"), "default", {"metadata": {"name": "w"}}
    ).object
    configmap(sim, "child", ref(owner))
    await clock.settle()
    assert exists(sim, "v1", "ConfigMap", "child")
    sim.cluster.delete(crds, None, "widgets.example.com")
    await clock.settle()
    assert not exists(sim, "v1", "ConfigMap", "child")
