"""API discovery documents: `/version`, legacy `/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`,
aggregated v2.

Built from the registry on every request, so a CRD is discoverable the moment it is created. The
shapes are what kubectl 1.32 reads from a real API server; tests/integration/kubesim/test_kubectl.py
runs the real kubectl against them.
"""

from __future__ import annotations

from typing import Any

from kubesim.registry import Registry, ResourceType

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1_CONTENT_TYPE = (
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubesim",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUB_VERBS = ["get", "patch", "update"]
_ADDRESSES = [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]


def _subresources(rt: ResourceType) -> list[tuple[str, dict[str, str], list[str]]]:
    """(name, responseKind, verbs) of each subresource `rt` serves."""
    own = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    subs: list[tuple[str, dict[str, str], list[str]]] = []
    if rt.status_subresource:
        subs.append(("status", own, _SUB_VERBS))
    if rt.scale is not None:
        subs.append(
            ("scale", {"group": "autoscaling", "version": "v1", "kind": "Scale"}, _SUB_VERBS)
        )
    if "eviction" in rt.subresources:
        subs.append(
            ("eviction", {"group": "policy", "version": "v1", "kind": "Eviction"}, ["create"])
        )
    if "finalize" in rt.subresources:
        subs.append(("finalize", own, ["update"]))
    return subs


def legacy_api() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": _ADDRESSES}


def legacy_groups(registry: Registry) -> dict[str, Any]:
    groups = []
    for group, versions in registry.groups().items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def legacy_group(registry: Registry, group: str) -> dict[str, Any] | None:
    """`GET /apis/{group}`: one APIGroup, or None when the group is not served."""
    for found in legacy_groups(registry)["groups"]:
        if found["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **found}
    return None


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """`GET /api/v1` or `/apis/{g}/{v}`: an APIResourceList, or None when the group-version is not
    served."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub, kind, verbs in _subresources(rt):
            sub_entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind["kind"],
                "verbs": verbs,
            }
            if kind["group"] != rt.group or kind["version"] != rt.version:
                sub_entry["group"], sub_entry["version"] = kind["group"], kind["version"]
            resources.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = [
        {"subresource": name, "responseKind": kind, "verbs": verbs}
        for name, kind, verbs in _subresources(rt)
    ]
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(
    registry: Registry, *, core: bool, api_version: str = "apidiscovery.k8s.io/v2"
) -> dict[str, Any]:
    """Aggregated discovery: the core group (for `/api`) or every other group (for `/apis`)."""
    items = []
    for group, versions in registry.groups().items():
        if bool(group) == core:
            continue
        version_entries = []
        for version in versions:
            types = registry.in_group_version(group, version)
            version_entries.append(
                {
                    "version": version,
                    "resources": [_aggregated_resource(rt) for rt in types],
                    "freshness": "Current",
                }
            )
        items.append({"metadata": {"name": group}, "versions": version_entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    }


def wants_aggregated(accept: str) -> str | None:
    """The aggregated-discovery content type the Accept header asks for first, if any."""
    for part in accept.split(","):
        media = part.replace(" ", "")
        if "as=APIGroupDiscoveryList" in media and "g=apidiscovery.k8s.io" in media:
            if "v=v2beta1" in media:
                return AGGREGATED_V2BETA1_CONTENT_TYPE
            if "v=v2" in media:
                return AGGREGATED_CONTENT_TYPE
        elif media.split(";")[0] in ("application/json", "*/*"):
            return None
    return None
