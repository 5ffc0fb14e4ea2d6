"""Contract suite, list filtering: every label-selector operator and the field selectors, over
HTTP."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from .kubesim_contract import configmap, pod, status_of


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


LABELS = {
    "a": {"env": "prod", "tier": "web"},
    "b": {"env": "dev", "tier": "db"},
    "c": {"env": "test"},
    "d": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a"]),
        ("env==prod", ["a"]),
        ("env!=prod", ["b", "c", "d"]),
        ("env in (dev,test)", ["b", "c"]),
        ("env notin (dev,test)", ["a", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("env,tier=db", ["b"]),
        ("", ["a", "b", "c", "d"]),
    ],
    ids=[
        "equals",
        "double-equals",
        "not-equals",
        "in",
        "notin",
        "exists",
        "not-exists",
        "and",
        "empty",
    ],
)
async def test_label_selector_operators(
    kube_api: ApiClient, selector: str, expected: list[str]
) -> None:
    core = client.CoreV1Api(kube_api)
    for name, labels in LABELS.items():
        await core.create_namespaced_config_map("default", configmap(name, **labels))
    listed = await core.list_namespaced_config_map("default", label_selector=selector)
    assert [cm.metadata.name for cm in listed.items] == expected


@pytest.mark.parametrize(
    "selector", ["env in (a", "=x", "env=a b"], ids=["unclosed", "no-key", "space"]
)
async def test_malformed_label_selector_is_400(kube_api: ApiClient, selector: str) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).list_namespaced_config_map(
            "default", label_selector=selector
        )
    assert (err.value.status, status_of(err.value)["reason"]) == (400, "BadRequest")


async def test_field_selectors_on_name_and_namespace(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="other")))
    await core.create_namespaced_config_map("default", configmap("a"))
    await core.create_namespaced_config_map("other", configmap("a"))
    await core.create_namespaced_config_map("other", configmap("b"))
    by_name = await core.list_config_map_for_all_namespaces(field_selector="metadata.name=a")
    by_ns = await core.list_config_map_for_all_namespaces(
        field_selector="metadata.namespace!=default"
    )
    assert sorted((cm.metadata.namespace, cm.metadata.name) for cm in by_name.items) == [
        ("default", "a"),
        ("other", "a"),
    ]
    assert sorted(cm.metadata.name for cm in by_ns.items) == ["a", "b"]


async def test_pod_field_selectors_on_phase_and_node(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    for name in ("p1", "p2"):
        await core.create_namespaced_pod("default", pod(name))
    await core.patch_namespaced_pod_status("p2", "default", {"status": {"phase": "Running"}})
    running = await core.list_namespaced_pod("default", field_selector="status.phase=Running")
    node = (await core.read_namespaced_pod("p1", "default")).spec.node_name
    on_node = await core.list_namespaced_pod("default", field_selector=f"spec.nodeName={node}")
    assert [p.metadata.name for p in running.items] == ["p2"]
    assert [p.metadata.name for p in on_node.items] == ["p1", "p2"]


async def test_unknown_field_selector_is_400(kube_api: ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).list_namespaced_config_map(
            "default", field_selector="data.k=v"
        )
    assert err.value.status == 400


async def test_namespaced_list_does_not_leak_other_namespaces(kube_api: ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="other")))
    await core.create_namespaced_config_map("other", configmap("x"))
    assert (await core.list_namespaced_config_map("default")).items == []
    assert len((await core.list_config_map_for_all_namespaces()).items) == 1
