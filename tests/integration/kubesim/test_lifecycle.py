"""Contract suite, deletion lifecycle: finalizers, propagation policies, namespaces."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from .kubesim_contract import AS_MERGE_PATCH, configmap, status_of


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False  # no namespace controller or GC: finalizers stay until the test removes them


async def _with_finalizer(core: client.CoreV1Api, name: str = "f") -> Any:
    body = configmap(name)
    body["metadata"]["finalizers"] = ["test.kubesim.io/hold"]
    return await core.create_namespaced_config_map("default", body)


async def test_delete_with_finalizer_marks_the_object_and_keeps_it(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    created = await _with_finalizer(core)
    _, code, _ = await core.delete_namespaced_config_map_with_http_info("f", "default")
    marked = await core.read_namespaced_config_map("f", "default")
    assert code == 202
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.deletion_grace_period_seconds == 0
    assert int(marked.metadata.resource_version) > int(created.metadata.resource_version)


@pytest.mark.kubesim_control
async def test_removing_the_last_finalizer_deletes_with_a_fresh_resource_version(
    kube_api: ApiClient, open_watches: Callable[[int], Awaitable[None]]
) -> None:
    core = client.CoreV1Api(kube_api)
    await _with_finalizer(core)
    await core.delete_namespaced_config_map("f", "default")
    marked = await core.read_namespaced_config_map("f", "default")
    events: list[dict[str, Any]] = []

    async def collect() -> None:
        async with watch.Watch() as w:
            stream = w.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=marked.metadata.resource_version,
                timeout_seconds=5,
            )
            async for event in stream:
                events.append(event)
                if event["type"] == "DELETED":
                    return

    task = asyncio.create_task(collect())
    await open_watches(1)
    await core.patch_namespaced_config_map(
        "f", "default", {"metadata": {"finalizers": None}}, **AS_MERGE_PATCH
    )
    await asyncio.wait_for(task, 5)
    deleted = events[-1]["raw_object"]
    assert events[-1]["type"] == "DELETED"
    assert int(deleted["metadata"]["resourceVersion"]) > int(marked.metadata.resource_version)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("f", "default")
    assert err.value.status == 404


async def test_repeated_delete_is_idempotent(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await _with_finalizer(core)
    await core.delete_namespaced_config_map("f", "default")
    first = await core.read_namespaced_config_map("f", "default")
    await core.delete_namespaced_config_map("f", "default")
    second = await core.read_namespaced_config_map("f", "default")
    assert second.metadata.resource_version == first.metadata.resource_version


async def test_no_new_finalizers_once_deleting(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await _with_finalizer(core)
    await core.delete_namespaced_config_map("f", "default")
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map(
            "f",
            "default",
            {"metadata": {"finalizers": ["test.kubesim.io/hold", "late"]}},
            **AS_MERGE_PATCH,
        )
    assert err.value.status == 422


@pytest.mark.parametrize(
    ("policy", "finalizer"),
    [("Orphan", "orphan"), ("Foreground", "foregroundDeletion")],
    ids=["orphan", "foreground"],
)
async def test_propagation_policy_adds_its_finalizer(
    kube_api: ApiClient, policy: str, finalizer: str
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("owner"))
    await core.delete_namespaced_config_map("owner", "default", propagation_policy=policy)
    marked = await core.read_namespaced_config_map("owner", "default")
    assert marked.metadata.finalizers == [finalizer]
    assert marked.metadata.deletion_timestamp is not None


async def test_background_deletion_is_immediate(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("owner"))
    _, code, _ = await core.delete_namespaced_config_map_with_http_info(
        "owner", "default", propagation_policy="Background"
    )
    assert code == 200
    assert (await core.list_namespaced_config_map("default")).items == []


async def test_deleting_a_namespace_makes_it_terminating_and_refuses_new_objects(
    kube_api: ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team")))
    await core.create_namespaced_config_map("team", configmap("kept"))
    await core.delete_namespace("team")
    ns = await core.read_namespace("team")
    assert ns.status.phase == "Terminating"
    assert ns.spec.finalizers == ["kubernetes"]
    assert ns.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("team", configmap("late"))
    assert (err.value.status, status_of(err.value)["reason"]) == (403, "Forbidden")
    assert (await core.read_namespaced_config_map("kept", "team")).metadata.name == "kept"


async def test_finalizing_a_terminating_namespace_removes_it(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team")))
    await core.delete_namespace("team")
    ns = await core.read_namespace("team")
    ns.spec.finalizers = []
    await core.replace_namespace_finalize("team", ns)
    with pytest.raises(ApiException) as err:
        await core.read_namespace("team")
    assert err.value.status == 404


async def test_initial_namespaces_exist_and_default_cannot_be_deleted(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    names = {ns.metadata.name for ns in (await core.list_namespace()).items}
    assert {"default", "kube-system", "kube-public"} <= names
    with pytest.raises(ApiException) as err:
        await core.delete_namespace("default")
    assert err.value.status == 403
