"""Contract suite, verbs: create/get/update/patch/delete semantics through kubernetes-asyncio over
HTTP."""

from __future__ import annotations

import json
import re

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.app import KubeSim

from .kubesim_contract import (
    GROUP,
    JSON_PATCH,
    MERGE,
    PLURAL,
    VERSION,
    configmap,
    create_widget,
    get_widget,
    install_widget_crd,
    merge_patch_widget,
    status_of,
    widget,
)


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False  # the apiserver layer alone


async def test_create_sets_server_fields_and_answers_201(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    _, code, _ = await core.create_namespaced_config_map_with_http_info("default", configmap("a"))
    got = await core.read_namespaced_config_map("a", "default")
    assert code == 201
    assert got.metadata.uid
    assert got.metadata.creation_timestamp is not None
    assert int(got.metadata.resource_version) > 0
    assert got.metadata.generation == 1


async def test_resource_versions_come_from_one_increasing_counter(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    first = await core.create_namespaced_config_map("default", configmap("a"))
    second = await core.create_namespaced_config_map("default", configmap("b"))
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)


async def test_duplicate_create_is_409_already_exists(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map("default", configmap("a"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", configmap("a"))
    body = status_of(err.value)
    assert (err.value.status, body["reason"]) == (409, "AlreadyExists")
    assert body["details"] == {"name": "a", "group": "", "kind": "configmaps"}


async def test_get_missing_is_404_status_with_details(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    with pytest.raises(ApiException) as err:
        await get_widget(kube_api, "nope")
    body = status_of(err.value)
    assert err.value.status == 404
    assert body["message"] == 'widgets.test.kubesim.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": GROUP, "kind": PLURAL}


async def test_create_in_missing_namespace_is_404(kube_api: ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).create_namespaced_config_map("ghost", configmap("a"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "ghost" not found'


async def test_generate_name_appends_five_random_characters(kube_api: ApiClient) -> None:
    body = configmap("")
    body["metadata"] = {"generateName": "job-"}
    core = client.CoreV1Api(kube_api)
    names = {
        (await core.create_namespaced_config_map("default", body)).metadata.name for _ in range(5)
    }
    assert len(names) == 5
    assert all(re.fullmatch(r"job-[a-z0-9]{5}", n) for n in names)


async def test_update_with_stale_resource_version_is_409_and_changes_nothing(
    kube_api: ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_config_map("default", configmap("a"))
    await core.replace_namespaced_config_map(
        "a", "default", client.V1ConfigMap(metadata=created.metadata, data={"k": "first"})
    )
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_config_map(
            "a", "default", client.V1ConfigMap(metadata=created.metadata, data={"k": "stale"})
        )
    assert (err.value.status, status_of(err.value)["reason"]) == (409, "Conflict")
    assert (await core.read_namespaced_config_map("a", "default")).data == {"k": "first"}


async def test_generation_counts_spec_changes_only(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    created = await create_widget(kube_api, "w")
    labelled = await merge_patch_widget(kube_api, "w", {"metadata": {"labels": {"x": "y"}}})
    respecced = await merge_patch_widget(kube_api, "w", {"spec": {"replicas": 4}})
    assert created["metadata"]["generation"] == 1
    assert labelled["metadata"]["generation"] == 1
    assert respecced["metadata"]["generation"] == 2


async def test_noop_patch_keeps_resource_version(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    created = await create_widget(kube_api, "w")
    patched = await merge_patch_widget(kube_api, "w", {"spec": {"color": "blue"}})
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_custom_resource_update_needs_resource_version(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    with pytest.raises(ApiException) as err:
        await client.CustomObjectsApi(kube_api).replace_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "w", widget("w", 3)
        )
    assert err.value.status == 422


async def test_name_mismatch_between_url_and_body_is_400(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    created = await create_widget(kube_api, "w")
    created["metadata"]["name"] = "other"
    with pytest.raises(ApiException) as err:
        await client.CustomObjectsApi(kube_api).replace_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "w", created
        )
    assert err.value.status == 400


async def test_uid_is_immutable(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    with pytest.raises(ApiException) as err:
        await merge_patch_widget(
            kube_api, "w", {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}}
        )
    assert err.value.status == 422


async def test_stale_resource_version_in_merge_patch_is_409(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    created = await create_widget(kube_api, "w")
    await merge_patch_widget(kube_api, "w", {"spec": {"replicas": 2}})
    stale = {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"replicas": 9},
    }
    with pytest.raises(ApiException) as err:
        await merge_patch_widget(kube_api, "w", stale)
    assert err.value.status == 409
    assert (await get_widget(kube_api, "w"))["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("content_type", "body", "code"),
    [
        (JSON_PATCH, [{"op": "test", "path": "/spec/replicas", "value": 7}], 422),
        (
            JSON_PATCH,
            {"spec": {"replicas": 7}},
            400,
        ),  # what kubernetes-asyncio sends for a dict by default
        ("application/strategic-merge-patch+json", {"spec": {"replicas": 7}}, 415),
    ],
    ids=[
        "json-patch-failed-test-op",
        "json-patch-not-a-list",
        "strategic-merge-on-custom-resource",
    ],
)
async def test_refused_patches(
    kube_api: ApiClient, content_type: str, body: object, code: int
) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    with pytest.raises(ApiException) as err:
        await client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "w", body, _content_type=content_type
        )
    assert err.value.status == code
    assert (await get_widget(kube_api, "w"))["spec"]["replicas"] == 1


async def test_json_patch_applies_operations(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    ops = [
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/spec/color", "value": "red"},
    ]
    patched = await client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "w", ops, _content_type=JSON_PATCH
    )
    assert patched["spec"] == {"replicas": 3, "color": "red"}


async def test_server_side_apply_creates_then_updates(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    objects = client.CustomObjectsApi(kube_api)
    apply = "application/apply-patch+yaml"
    _, first, _ = await objects.patch_namespaced_custom_object_with_http_info(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w",
        widget("w", 2),
        field_manager="t",
        _content_type=apply,
    )
    _, second, _ = await objects.patch_namespaced_custom_object_with_http_info(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w",
        widget("w", 5),
        field_manager="t",
        _content_type=apply,
    )
    assert (first, second) == (201, 200)
    assert (await get_widget(kube_api, "w"))["spec"]["replicas"] == 5


async def test_dry_run_create_and_delete_store_nothing(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    dry = await core.create_namespaced_config_map("default", configmap("dry"), dry_run="All")
    assert dry.metadata.name == "dry"
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("dry", "default")
    assert err.value.status == 404
    await core.create_namespaced_config_map("default", configmap("real"))
    await core.delete_namespaced_config_map("real", "default", dry_run="All")
    assert (await core.read_namespaced_config_map("real", "default")).metadata.name == "real"


async def test_delete_collection_honours_label_selector(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    for name, team in [("a", "x"), ("b", "x"), ("c", "y")]:
        await core.create_namespaced_config_map("default", configmap(name, team=team))
    await core.delete_collection_namespaced_config_map("default", label_selector="team=x")
    left = await core.list_namespaced_config_map("default")
    assert [cm.metadata.name for cm in left.items] == ["c"]


async def test_list_pages_are_a_consistent_snapshot(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    for i in range(5):
        await core.create_namespaced_config_map("default", configmap(f"cm{i}"))
    first = await core.list_namespaced_config_map("default", limit=2)
    await core.create_namespaced_config_map("default", configmap("cm25"))  # lands between pages
    await core.delete_namespaced_config_map("cm4", "default")
    second = await core.list_namespaced_config_map(
        "default", limit=2, _continue=first.metadata._continue
    )
    third = await core.list_namespaced_config_map(
        "default", limit=2, _continue=second.metadata._continue
    )
    names = [cm.metadata.name for page in (first, second, third) for cm in page.items]
    assert names == ["cm0", "cm1", "cm2", "cm3", "cm4"]
    assert first.metadata.remaining_item_count == 3
    assert third.metadata._continue is None
    assert second.metadata.resource_version == first.metadata.resource_version


async def test_list_has_kind_api_version_and_resource_version(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    listed = await client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL
    )
    assert (listed["kind"], listed["apiVersion"]) == ("WidgetList", f"{GROUP}/{VERSION}")
    assert int(listed["metadata"]["resourceVersion"]) >= int(
        listed["items"][0]["metadata"]["resourceVersion"]
    )


async def test_patch_content_type_must_be_explicit_for_merge(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    merged = await client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "w", {"spec": {"color": None}}, _content_type=MERGE
    )
    assert merged["spec"] == {"replicas": 1}


async def test_invalid_create_is_422_with_causes_and_stores_nothing(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    with pytest.raises(ApiException) as err:
        await create_widget(kube_api, "w", replicas=-1)
    body = status_of(err.value)
    assert (err.value.status, body["reason"]) == (422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.replicas"]
    objects = client.CustomObjectsApi(kube_api)
    assert (await objects.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL))[
        "items"
    ] == []


@pytest.mark.parametrize("status", [False, True], ids=["main", "status"])
async def test_invalid_patch_changes_nothing(kube_api: ApiClient, status: bool) -> None:
    await install_widget_crd(kube_api)
    created = await create_widget(kube_api, "w")
    bad = {"status": {"replicas": "many"}} if status else {"spec": {"replicas": -3}}
    with pytest.raises(ApiException) as err:
        await merge_patch_widget(kube_api, "w", bad, status=status)
    assert err.value.status == 422
    unchanged = await get_widget(kube_api, "w")
    assert unchanged["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_lease_takeover_race_has_one_winner(kube_api: ApiClient) -> None:
    leases = client.CoordinationV1Api(kube_api)
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15}
    created = await leases.create_namespaced_lease(
        "default",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader"},
            "spec": spec,
        },
    )
    created.spec.holder_identity = "b"
    await leases.replace_namespaced_lease("leader", "default", created)
    created.spec.holder_identity = "c"
    with pytest.raises(ApiException) as err:
        await leases.replace_namespaced_lease("leader", "default", created)
    assert err.value.status == 409
    assert (await leases.read_namespaced_lease("leader", "default")).spec.holder_identity == "b"


async def test_put_without_content_type_is_read_as_json(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    created = await client.CoreV1Api(kube_api).create_namespaced_config_map(
        "default", configmap("a")
    )
    body = {
        "metadata": {"name": "a", "resourceVersion": created.metadata.resource_version},
        "data": {"k": "2"},
    }
    url = kubesim.url + "/api/v1/namespaces/default/configmaps/a"
    async with (
        aiohttp.ClientSession() as session,
        session.put(
            url, data=json.dumps(body).encode(), skip_auto_headers=["Content-Type"]
        ) as resp,
    ):
        assert "Content-Type" not in resp.request_info.headers
        assert resp.status == 200
        assert (await resp.json())["data"] == {"k": "2"}
