"""kubesim.cluster in process: listeners, multi-version CRDs, generation rules, copies, pod
grace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim import builtins, errors
from kubesim.cluster import Cluster, DeleteOptions, WriteOptions
from kubesim.registry import ResourceType

MERGE = "application/merge-patch+json"


def thing_crd(*, status: bool) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    version: dict[str, Any] = {
        "served": True,
        "schema": schema,
        "subresources": {"status": {}} if status else {},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [
                {**version, "name": "v1", "storage": False},
                {**version, "name": "v2", "storage": True},
            ],
        },
    }


def things(cluster: Cluster, version: str) -> ResourceType:
    rt = cluster.registry.by_plural("example.com", version, "things")
    assert rt is not None
    return rt


def test_listeners_see_commits_in_order_even_when_they_write() -> None:
    cluster = Cluster()
    seen: list[tuple[str, str]] = []

    def listener(
        kind: str, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        seen.append((kind, obj["metadata"]["name"]))
        if obj["metadata"]["name"] == "a":
            cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": "from-listener"}})

    cluster.add_listener(listener)
    cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}})
    cluster.delete(builtins.CONFIGMAPS, "default", "a")
    assert seen == [("ADDED", "a"), ("ADDED", "from-listener"), ("DELETED", "a")]


def test_objects_are_served_in_every_version_and_stored_once() -> None:
    cluster = Cluster()
    cluster.create(builtins.CRDS, None, thing_crd(status=True))
    cluster.create(things(cluster, "v1"), "default", {"metadata": {"name": "t"}, "spec": {"x": 1}})
    via_v2 = cluster.get(things(cluster, "v2"), "default", "t")
    via_v1 = cluster.list(things(cluster, "v1"), "default")
    assert via_v2["apiVersion"] == "example.com/v2"
    assert [i["apiVersion"] for i in via_v1["items"]] == ["example.com/v1"]
    assert cluster.store.count(("example.com", "things")) == 1


def test_status_changes_bump_generation_without_a_status_subresource() -> None:
    cluster = Cluster()
    cluster.create(builtins.CRDS, None, thing_crd(status=False))
    rt = things(cluster, "v2")
    cluster.create(rt, "default", {"metadata": {"name": "t"}, "status": {"ok": False}})
    written = cluster.patch(rt, "default", "t", b'{"status":{"ok":true}}', MERGE)
    assert written.object["status"] == {"ok": True}
    assert written.object["metadata"]["generation"] == 2


def test_returned_objects_are_copies() -> None:
    cluster = Cluster()
    created = cluster.create(
        builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}}
    )
    created.object["data"]["k"] = "mutated"
    got = cluster.get(builtins.CONFIGMAPS, "default", "a")
    got["data"]["k"] = "mutated"
    assert cluster.get(builtins.CONFIGMAPS, "default", "a")["data"] == {"k": "v"}


def test_a_status_write_keeps_nothing_of_the_callers_body() -> None:
    # /status copies only the status; the stored pod must not share it (or anything else) with the
    # body.
    cluster = Cluster()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    cluster.create(builtins.PODS, "default", pod)
    current = cluster.get(builtins.PODS, "default", "p")
    body = {
        **current,
        "status": {**current["status"], "phase": "Running", "hostIPs": [{"ip": "1.2.3.4"}]},
    }
    cluster.update(builtins.PODS, "default", "p", body, subresource="status")
    body["status"]["hostIPs"][0]["ip"] = "mutated"
    body["status"]["conditions"][0]["status"] = "mutated"  # a part the write left unchanged
    body["metadata"]["labels"] = {"mutated": "yes"}
    body["spec"]["containers"][0]["image"] = "mutated"
    stored = cluster.get(builtins.PODS, "default", "p")
    assert stored["status"]["hostIPs"] == [{"ip": "1.2.3.4"}]
    assert stored["status"]["conditions"][0]["status"] == "True"
    assert "labels" not in stored["metadata"]
    assert stored["spec"]["containers"][0]["image"] == "busybox"


def test_a_write_leaves_the_previous_versions_as_they_were() -> None:
    # Versions share unchanged parts (admission does not copy them again); a watch replaying the
    # history must still see each version as it was written.
    cluster = Cluster()
    cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    cluster.patch(builtins.CONFIGMAPS, "default", "a", b'{"metadata":{"labels":{"x":"y"}}}', MERGE)
    cluster.patch(builtins.CONFIGMAPS, "default", "a", b'{"data":{"k":"w"}}', MERGE)
    replay = cluster.store.changes_since(builtins.CONFIGMAPS.storage_key, "default", 0) or []
    versions = [c.object for c in replay if c.object["metadata"]["name"] == "a"]
    assert [v.get("data") for v in versions] == [{"k": "v"}, {"k": "v"}, {"k": "w"}]
    assert [v["metadata"].get("labels") for v in versions] == [None, {"x": "y"}, {"x": "y"}]


def test_listeners_get_the_stored_objects_and_results_are_copied_on_use() -> None:
    cluster = Cluster()
    seen: list[dict[str, Any]] = []
    cluster.add_listener(lambda _kind, _rt, obj, _old: seen.append(obj))
    written = cluster.create(
        builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}}
    )
    stored = cluster.store.get(builtins.CONFIGMAPS.storage_key, "default", "a")
    assert len(seen) == 1
    assert seen[0] is stored
    assert written.stored is stored
    assert written.object == stored
    assert written.object is not stored


async def test_a_burst_of_changes_reaches_a_watch_in_one_batch() -> None:
    cluster = Cluster()
    batches = cluster.watch_batches(builtins.CONFIGMAPS, "default", resource_version="0")
    try:
        first = asyncio.create_task(anext(batches))
        await asyncio.sleep(0)  # the watch registers and waits
        for name in ("a", "b", "c"):
            cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": name}})
        batch = await asyncio.wait_for(first, 5)
        assert [(e.type, e.object["metadata"]["name"]) for e in batch] == [
            ("ADDED", "a"),
            ("ADDED", "b"),
            ("ADDED", "c"),
        ]
    finally:
        await batches.aclose()  # type: ignore[attr-defined]


def test_dry_run_update_changes_nothing() -> None:
    cluster = Cluster()
    cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    rv = cluster.store.resource_version
    written = cluster.patch(
        builtins.CONFIGMAPS,
        "default",
        "a",
        b'{"data":{"k":"w"}}',
        MERGE,
        opts=WriteOptions(dry_run=True),
    )
    assert written.object["data"] == {"k": "w"}
    assert cluster.get(builtins.CONFIGMAPS, "default", "a")["data"] == {"k": "v"}
    assert cluster.store.resource_version == rv


def test_terminating_pod_without_finalizers_waits_for_its_grace_period() -> None:
    cluster = Cluster()
    pod = {
        "metadata": {"name": "p", "finalizers": ["example.com/x"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    cluster.create(builtins.PODS, "default", pod)
    cluster.delete(builtins.PODS, "default", "p")
    cluster.patch(builtins.PODS, "default", "p", b'{"metadata":{"finalizers":null}}', MERGE)
    left = cluster.get(builtins.PODS, "default", "p")
    assert left["metadata"]["deletionGracePeriodSeconds"] == 30
    cluster.delete(builtins.PODS, "default", "p", options=DeleteOptions(grace_period_seconds=0))
    with pytest.raises(errors.StatusError) as err:
        cluster.get(builtins.PODS, "default", "p")
    assert err.value.code == 404


def test_finished_pods_are_deleted_without_grace() -> None:
    cluster = Cluster()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    cluster.create(builtins.PODS, "default", pod)
    cluster.patch(
        builtins.PODS,
        "default",
        "p",
        b'{"status":{"phase":"Succeeded"}}',
        MERGE,
        subresource="status",
    )
    assert cluster.delete_object(builtins.PODS, "default", "p").deleted


def test_delete_preconditions_are_checked() -> None:
    cluster = Cluster()
    cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": "a"}})
    with pytest.raises(errors.StatusError) as err:
        cluster.delete(
            builtins.CONFIGMAPS,
            "default",
            "a",
            options=DeleteOptions(preconditions={"uid": "nope"}),
        )
    assert err.value.code == 409
    assert cluster.get(builtins.CONFIGMAPS, "default", "a")


def test_namespace_main_endpoint_cannot_drop_the_kubernetes_finalizer() -> None:
    cluster = Cluster()
    cluster.create(builtins.NAMESPACES, None, {"metadata": {"name": "team"}})
    cluster.patch(builtins.NAMESPACES, None, "team", b'{"spec":{"finalizers":[]}}', MERGE)
    assert cluster.get(builtins.NAMESPACES, None, "team")["spec"]["finalizers"] == ["kubernetes"]
