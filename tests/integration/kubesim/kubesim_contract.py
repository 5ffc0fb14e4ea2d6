"""Shared pieces of the kubesim contract suite: the test CRD and small client helpers.

Everything here talks to the API over HTTP only, so the suite can be pointed at a real cluster.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

CRD_PATH = Path(__file__).with_name("widget_crd.yaml")
GROUP, VERSION, PLURAL = "test.kubesim.io", "v1", "widgets"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def widget_crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return loaded


async def install_widget_crd(api: ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition(body=widget_crd())
    for _ in range(100):  # a real apiserver establishes a CRD asynchronously
        crd = await ext.read_custom_resource_definition("widgets.test.kubesim.io")
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("CRD never became Established")


def widget(name: str, replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"replicas": replicas, "color": "blue"},
    }


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }


def pod(name: str, *, grace: int | None = None, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def status_of(exc: ApiException) -> dict[str, Any]:
    """The `kind: Status` body of an API error."""
    body: dict[str, Any] = json.loads(exc.body)
    assert body["kind"] == "Status", body
    return body


async def create_widget(api: ApiClient, name: str, replicas: int = 1, **labels: str) -> dict[str, Any]:
    created: dict[str, Any] = await client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, widget(name, replicas, **labels)
    )
    return created


async def get_widget(api: ApiClient, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name
    )
    return got


async def merge_patch_widget(api: ApiClient, name: str, body: Any, *, status: bool = False) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    call = objects.patch_namespaced_custom_object_status if status else objects.patch_namespaced_custom_object
    patched: dict[str, Any] = await call(GROUP, VERSION, "default", PLURAL, name, body, _content_type=MERGE)
    return patched
