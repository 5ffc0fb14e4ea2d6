"""Contract suite, subresources and kinds: /status, /scale, pods (binding, grace, eviction), jobs,
CRDs."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from .kubesim_contract import (
    GROUP,
    PLURAL,
    VERSION,
    create_widget,
    get_widget,
    install_widget_crd,
    merge_patch_widget,
    pod,
    status_of,
    widget_crd,
)


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False  # no kubelet: pods stay as the apiserver leaves them


async def test_main_endpoint_ignores_status_and_status_endpoint_writes_only_status(
    kube_api: ApiClient,
) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    via_main = await merge_patch_widget(
        kube_api, "w", {"status": {"replicas": 5}, "spec": {"color": "red"}}
    )
    via_status = await merge_patch_widget(
        kube_api, "w", {"status": {"replicas": 2}, "spec": {"color": "green"}}, status=True
    )
    assert "status" not in via_main
    assert via_main["spec"]["color"] == "red"
    assert via_status["status"] == {"replicas": 2}
    assert via_status["spec"]["color"] == "red"
    assert via_status["metadata"]["generation"] == via_main["metadata"]["generation"]


async def test_create_drops_status_when_the_status_subresource_is_on(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"replicas": 1},
        "status": {"replicas": 9},
    }
    created = await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, body
    )
    assert "status" not in created


async def test_scale_subresource_maps_replica_paths(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w", replicas=3)
    await merge_patch_widget(
        kube_api, "w", {"status": {"replicas": 2, "selector": "app=w"}}, status=True
    )
    scale = await client.CustomObjectsApi(kube_api).get_namespaced_custom_object_scale(
        GROUP, VERSION, "default", PLURAL, "w"
    )
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}


async def test_scale_patch_and_put_change_spec_replicas(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w", replicas=1)
    objects = client.CustomObjectsApi(kube_api)
    await objects.patch_namespaced_custom_object_scale(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w",
        {"spec": {"replicas": 4}},
        _content_type="application/merge-patch+json",
    )
    scale = await objects.get_namespaced_custom_object_scale(GROUP, VERSION, "default", PLURAL, "w")
    scale["spec"]["replicas"] = 6
    await objects.replace_namespaced_custom_object_scale(
        GROUP, VERSION, "default", PLURAL, "w", scale
    )
    widget = await get_widget(kube_api, "w")
    assert widget["spec"]["replicas"] == 6
    assert widget["metadata"]["generation"] == 3


async def test_scale_put_with_stale_resource_version_is_409(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w", replicas=1)
    objects = client.CustomObjectsApi(kube_api)
    scale = await objects.get_namespaced_custom_object_scale(GROUP, VERSION, "default", PLURAL, "w")
    await merge_patch_widget(kube_api, "w", {"spec": {"replicas": 2}})
    scale["spec"]["replicas"] = 8
    with pytest.raises(ApiException) as err:
        await objects.replace_namespaced_custom_object_scale(
            GROUP, VERSION, "default", PLURAL, "w", scale
        )
    assert err.value.status == 409
    assert (await get_widget(kube_api, "w"))["spec"]["replicas"] == 2


async def test_new_pods_are_bound_and_pending(
    kube_api: ApiClient, kubesim_settings: object
) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_pod("default", pod("p"))
    assert created.spec.node_name
    assert created.status.phase == "Pending"


async def test_pod_status_is_written_through_the_status_subresource_only(
    kube_api: ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p"))
    await core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    assert (await core.read_namespaced_pod("p", "default")).status.phase == "Pending"
    await core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert (await core.read_namespaced_pod("p", "default")).status.phase == "Running"


async def test_bound_pod_deletion_is_graceful(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p", grace=30))
    _, code, _ = await core.delete_namespaced_pod_with_http_info("p", "default")
    terminating = await core.read_namespaced_pod("p", "default")
    assert code == 202
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    await core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("p", "default")
    assert err.value.status == 404


async def test_pod_with_zero_grace_is_deleted_at_once(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p", grace=0))
    _, code, _ = await core.delete_namespaced_pod_with_http_info("p", "default")
    assert code == 200
    assert (await core.list_namespaced_pod("default")).items == []


async def test_eviction_deletes_the_pod_gracefully(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p", grace=10))
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="p", namespace="default"))
    _, code, _ = await core.create_namespaced_pod_eviction_with_http_info("p", "default", eviction)
    evicted = await core.read_namespaced_pod("p", "default")
    assert code == 201
    assert evicted.metadata.deletion_grace_period_seconds == 10


async def test_job_delete_without_policy_orphans_pods_with_a_warning(kube_api: ApiClient) -> None:
    batch = client.BatchV1Api(kube_api)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    await batch.create_namespaced_job("default", job)
    _, _, headers = await batch.delete_namespaced_job_with_http_info("j", "default")
    left = await batch.read_namespaced_job("j", "default")
    assert "child pods are preserved by default" in headers.get("Warning", "")
    assert left.metadata.finalizers == ["orphan"]


async def test_crd_is_established_and_discoverable_at_once(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    crd = await client.ApiextensionsV1Api(kube_api).read_custom_resource_definition(
        "widgets.test.kubesim.io"
    )
    resources = await client.CustomObjectsApi(kube_api).get_api_resources(GROUP, VERSION)
    assert {c.type for c in crd.status.conditions} >= {"Established", "NamesAccepted"}
    assert {r.name for r in resources.resources} == {"widgets", "widgets/status", "widgets/scale"}


async def test_crd_delete_removes_its_objects(kube_api: ApiClient) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w")
    await client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(
        "widgets.test.kubesim.io"
    )
    with pytest.raises(ApiException) as err:
        await get_widget(kube_api, "w")
    assert err.value.status == 404
    await install_widget_crd(kube_api)
    listed = await client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL
    )
    assert listed["items"] == []


async def test_crd_name_must_be_plural_dot_group(kube_api: ApiClient) -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "wrong.test.kubesim.io"
    with pytest.raises(ApiException) as err:
        await client.ApiextensionsV1Api(kube_api).create_custom_resource_definition(crd)
    assert err.value.status == 422
    assert status_of(err.value)["reason"] == "Invalid"


async def test_the_node_pods_are_bound_to_exists_and_is_ready(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_pod("default", pod("p"))
    node = await core.read_node(created.spec.node_name)
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", "True")]


async def test_deprecated_versions_answer_with_a_warning(kube_api: ApiClient) -> None:
    crd = widget_crd()
    old = {**crd["spec"]["versions"][0], "name": "v1beta1", "storage": False, "deprecated": True}
    crd["spec"]["versions"].append(old)
    await client.ApiextensionsV1Api(kube_api).create_custom_resource_definition(crd)
    objects = client.CustomObjectsApi(kube_api)
    _, _, new_headers = await objects.list_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "default", PLURAL
    )
    _, _, old_headers = await objects.list_namespaced_custom_object_with_http_info(
        GROUP, "v1beta1", "default", PLURAL
    )
    assert "Warning" not in new_headers
    assert old_headers["Warning"] == '299 - "test.kubesim.io/v1beta1 Widget is deprecated"'
