"""Contract suite, discovery and representations: /version, /api(s), OpenAPI stub, Tables, content
types."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from kubesim.app import KubeSim

from .kubesim_contract import GROUP, create_widget, install_widget_crd, merge_patch_widget

AGGREGATED = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


async def _get(url: str, accept: str = "application/json") -> tuple[int, str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers={"Accept": accept}) as resp,
    ):
        return resp.status, resp.headers.get("Content-Type", ""), await resp.json(content_type=None)


async def test_version_reports_minor_32(kubesim: KubeSim) -> None:
    _, _, body = await _get(kubesim.url + "/version")
    assert (body["major"], body["minor"]) == ("1", "32")


async def test_aggregated_discovery_has_its_own_content_type(kubesim: KubeSim) -> None:
    _, content_type, core = await _get(kubesim.url + "/api", AGGREGATED)
    _, _, groups = await _get(kubesim.url + "/apis", AGGREGATED)
    assert content_type.replace(" ", "").startswith(
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert core["items"][0]["metadata"]["name"] == ""
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert {s["subresource"] for s in pods["subresources"]} == {"status", "eviction"}
    assert {"batch", "coordination.k8s.io", "apiextensions.k8s.io"} <= {
        g["metadata"]["name"] for g in groups["items"]
    }


async def test_legacy_discovery_names_core_group_version_v1(kubesim: KubeSim) -> None:
    _, content_type, api = await _get(kubesim.url + "/api")
    _, _, v1 = await _get(kubesim.url + "/api/v1")
    assert content_type.startswith("application/json")
    assert api["versions"] == ["v1"]
    assert v1["groupVersion"] == "v1"
    assert {"pods", "pods/status", "pods/eviction", "namespaces/finalize"} <= {
        r["name"] for r in v1["resources"]
    }


async def test_new_crd_appears_in_discovery_with_scale_as_autoscaling(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    await install_widget_crd(kube_api)
    _, _, groups = await _get(kubesim.url + "/apis", AGGREGATED)
    _, _, legacy = await _get(kubesim.url + f"/apis/{GROUP}/v1")
    group = next(g for g in groups["items"] if g["metadata"]["name"] == GROUP)
    widgets = group["versions"][0]["resources"][0]
    scale = next(r for r in legacy["resources"] if r["name"] == "widgets/scale")
    assert (widgets["resource"], widgets["shortNames"], widgets["categories"]) == (
        "widgets",
        ["wdg"],
        ["kubesim-test"],
    )
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")


async def test_openapi_v3_lists_every_group_version_and_v2_is_absent(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    await install_widget_crd(kube_api)
    _, _, root = await _get(kubesim.url + "/openapi/v3")
    status, _, doc = await _get(
        kubesim.url + root["paths"][f"apis/{GROUP}/v1"]["serverRelativeURL"]
    )
    missing, content_type, _ = await _get(kubesim.url + "/openapi/v2")
    patch = doc["paths"][f"/apis/{GROUP}/v1/namespaces/{{namespace}}/widgets/{{name}}"]["patch"]
    assert {"api/v1", "apis/batch/v1", "apis/coordination.k8s.io/v1"} <= set(root["paths"])
    assert status == 200
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "Widget"
    assert (missing, content_type) == (404, "application/json")


async def test_table_uses_printer_columns_and_humanised_age(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    await install_widget_crd(kube_api)
    await create_widget(kube_api, "w", replicas=3)
    ready = {"type": "Ready", "status": "True"}
    await merge_patch_widget(kube_api, "w", {"status": {"conditions": [ready]}}, status=True)
    _, _, tbl = await _get(kubesim.url + f"/apis/{GROUP}/v1/namespaces/default/widgets", TABLE)
    assert tbl["kind"] == "Table"
    assert [c["name"] for c in tbl["columnDefinitions"]] == ["Name", "Replicas", "Ready", "Age"]
    name, replicas, is_ready, age = tbl["rows"][0]["cells"]
    assert (name, replicas, is_ready) == ("w", 3, "True")
    assert age.endswith("s")
    assert tbl["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_pod_table_has_ready_status_restarts(kubesim: KubeSim, kube_api: ApiClient) -> None:
    await client.CoreV1Api(kube_api).create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    _, _, tbl = await _get(kubesim.url + "/api/v1/namespaces/default/pods/p", TABLE)
    assert [c["name"] for c in tbl["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    assert tbl["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", 0]


async def test_table_rows_carry_the_object_include_object_asks_for(
    kubesim: KubeSim, kube_api: ApiClient
) -> None:
    await client.CoreV1Api(kube_api).create_namespaced_pod(
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    base = kubesim.url + "/api/v1/namespaces/default/pods"
    seen: dict[str, Any] = {}
    for include in ("None", "Metadata", "Object", ""):
        for url in (f"{base}?includeObject={include}", f"{base}/p?includeObject={include}"):
            _, _, tbl = await _get(url, TABLE)
            seen.setdefault(include, set()).add(tbl["rows"][0].get("object", {}).get("kind"))
    assert seen == {
        "None": {None},
        "Metadata": {"PartialObjectMetadata"},
        "Object": {"Pod"},
        "": {"PartialObjectMetadata"},
    }
    status, _, body = await _get(f"{base}?includeObject=Everything", TABLE)
    assert status == 400, body
    assert "includeObject" in body["message"], body


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/pods/missing",
        "/apis/nope.io/v1/things",
        "/api/v1/namespaces/default/pods/x/nope",
        "/api/v1/namespaces/default/nodes",
    ],
    ids=["missing-object", "unknown-group", "unknown-subresource", "cluster-scoped-in-namespace"],
)
async def test_errors_are_json_status_bodies(kubesim: KubeSim, path: str) -> None:
    status, content_type, body = await _get(kubesim.url + path)
    assert (status, content_type) == (404, "application/json")
    assert (body["kind"], body["status"], body["code"]) == ("Status", "Failure", 404)


async def test_metadata_only_lists_and_gets(kubesim: KubeSim, kube_api: ApiClient) -> None:
    await client.CoreV1Api(kube_api).create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"secret": "x"}}
    )
    base = kubesim.url + "/api/v1/namespaces/default/configmaps"
    _, _, listed = await _get(
        base, "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    )
    _, _, one = await _get(
        base + "/cm", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    )
    assert listed["kind"] == "PartialObjectMetadataList"
    assert listed["metadata"]["resourceVersion"]
    assert [i["metadata"]["labels"] for i in listed["items"]] == [{"a": "b"}]
    assert one["kind"] == "PartialObjectMetadata"
    assert "data" not in one


async def test_writes_to_a_collection_url_are_405(kubesim: KubeSim) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.put(kubesim.url + "/api/v1/namespaces/default/configmaps", json={}) as resp,
    ):
        assert resp.status == 405
        assert (await resp.json())["reason"] == "MethodNotAllowed"
