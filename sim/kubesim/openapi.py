"""The minimal OpenAPI v3 documents kubectl needs to validate on the server
(`fieldValidation=Strict`).

kubectl's query-parameter verifier only looks, per group-version-kind, for a `patch` operation that
lists a `fieldValidation` parameter; with it, `kubectl apply/create` skip schema downloads and let
the server validate. Custom resources also get their structural schema under `components.schemas`,
which is what `kubectl explain` reads. Every served group-version must appear in the root, or
kubectl falls back to `/openapi/v2`, which kubesim does not serve (kubectl 1.32 tolerates that 404).
"""

from __future__ import annotations

from typing import Any

from kubesim.registry import Registry


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def root(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in registry.groups().items():
        for version in versions:
            gv = _gv_path(group, version)
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={registry.revision}"}
    return {"paths": paths}


def group_version(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types:
        if rt.schema is not None:
            # A CRD's schema under the apiserver's name for it, so `kubectl explain` can describe
            # it.
            reversed_group = ".".join(reversed(group.split(".")))
            schemas[f"{reversed_group}.{version}.{rt.kind}"] = {
                **rt.schema,
                "x-kubernetes-group-version-kind": [
                    {"group": group, "version": version, "kind": rt.kind}
                ],
            }
        prefix = "/" + _gv_path(group, version)
        item = (
            f"{prefix}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
            if rt.namespaced
            else f"{prefix}/{rt.plural}/{{name}}"
        )
        gvk = {"group": group, "version": version, "kind": rt.kind}
        params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]
        paths[item] = {"patch": {"x-kubernetes-group-version-kind": gvk, "parameters": params}}
    document: dict[str, Any] = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
    }
    if schemas:
        document["components"] = {"schemas": schemas}
    return document
