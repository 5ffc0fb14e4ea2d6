"""Shared pieces of the kubesim contract suite: the test CRD and small client helpers.

Everything here talks to the API over HTTP only, so the suite can be pointed at a real cluster.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.testing import eventually

CRD_PATH = Path(__file__).with_name("widget_crd.yaml")
GROUP, VERSION, PLURAL = "test.kubesim.io", "v1", "widgets"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
AS_MERGE_PATCH: dict[str, Any] = {"_content_type": MERGE}
"""`**AS_MERGE_PATCH` sends a client patch call as a merge patch (a keyword the client's annotations
omit)."""

# The object builders below are typed Any: the client accepts plain dicts, though its annotations
# name the V1 models.


def widget_crd() -> Any:
    return yaml.safe_load(CRD_PATH.read_text())


async def install_widget_crd(api: ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition(body=widget_crd())

    async def established() -> bool:
        crd = await ext.read_custom_resource_definition("widgets.test.kubesim.io")
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    # Annotated as `eventually`'s own parameter type: mypy cannot solve it from an async function
    # alone.
    check: Callable[[], bool | Awaitable[bool | None] | None] = established
    # A real apiserver establishes a CRD asynchronously; only HTTP is used, so no `sim=` to wake on.
    await eventually(check, what="the widgets CRD Established")


def widget(name: str, replicas: int = 1, **labels: str) -> Any:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"replicas": replicas, "color": "blue"},
    }


def configmap(name: str, **labels: str) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }


def pod(name: str, *, grace: int | None = None, **labels: str) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def status_of(exc: ApiException) -> dict[str, Any]:
    """The `kind: Status` body of an API error."""
    body: dict[str, Any] = json.loads(exc.body or b"")
    assert body["kind"] == "Status", body
    return body


async def create_widget(
    api: ApiClient, name: str, replicas: int = 1, **labels: str
) -> dict[str, Any]:
    created: dict[str, Any] = await client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, widget(name, replicas, **labels)
    )
    return created


async def get_widget(api: ApiClient, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name
    )
    return got


async def merge_patch_widget(
    api: ApiClient, name: str, body: Any, *, status: bool = False
) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    call = (
        objects.patch_namespaced_custom_object_status
        if status
        else objects.patch_namespaced_custom_object
    )
    patched: dict[str, Any] = await call(
        GROUP, VERSION, "default", PLURAL, name, body, **AS_MERGE_PATCH
    )
    return patched
