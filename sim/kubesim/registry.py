"""Which resource types the simulated apiserver serves: built-in kinds and CRD-registered ones.

A `ResourceType` is one served group/version/resource. Objects are stored once per group/resource
(`ResourceType.storage_key`) whatever version they are served in, because CRD versions here use the
`None` conversion strategy: only `apiVersion` differs between versions. The registry re-registers a
CRD's versions whenever the CRD object is created, updated or deleted
(`register_crd`/`unregister_crd`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

StorageKey = tuple[str, str]
"""(group, plural): where objects of a resource live, whichever version they are served in."""


@dataclass(frozen=True)
class ScaleSubresource:
    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None

    def to_scale(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The `autoscaling/v1` Scale of `obj`, read through the replica and selector paths."""
        meta = obj.get("metadata") or {}
        status: dict[str, Any] = {"replicas": get_path(obj, self.status_replicas_path) or 0}
        if self.label_selector_path:
            selector = get_path(obj, self.label_selector_path)
            if isinstance(selector, str) and selector:
                status["selector"] = selector
        kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in kept if k in meta},
            "spec": {"replicas": get_path(obj, self.spec_replicas_path) or 0},
            "status": status,
        }


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    builtin: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    scale: ScaleSubresource | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    """openAPIV3Schema of this version for custom resources; None for built-in kinds."""
    deprecated: bool = False
    deprecation_warning: str | None = None
    storage: bool = True
    """True for the version objects are stored in (the CRD's storage version; always for
    built-ins)."""
    subresources: tuple[str, ...] = ()
    """Subresources other than status/scale that this resource serves (e.g. pods/eviction)."""
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> StorageKey:
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified_plural(self) -> str:
        """`pods`, `mpijobs.kubeflow.org`: the resource as apiserver messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key for Kubernetes' kube-aware version order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 >
    foo."""
    m = _VERSION_RE.match(version)
    if m is None:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stability = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stability, -major, -minor, version)


def _path_parts(path: str) -> list[str]:
    """`.spec.replicas` -> ["spec", "replicas"]; the simple JSON paths a scale subresource
    allows."""
    return [p for p in path.strip().lstrip(".").split(".") if p]


def get_path(obj: dict[str, Any], path: str) -> Any:
    current: Any = obj
    for part in _path_parts(path):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Sets `value` at `path`, creating the intermediate objects on the way."""
    parts = _path_parts(path)
    current = obj
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            current[part] = nxt
        current = nxt
    current[parts[-1]] = value


def crd_resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of a CustomResourceDefinition (apiextensions.k8s.io/v1) as
    ResourceTypes."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    kind = str(names.get("kind", ""))
    plural = str(names.get("plural", ""))
    singular = str(names.get("singular") or kind.lower())
    types: list[ResourceType] = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale_spec = subresources.get("scale")
        scale = None
        if isinstance(scale_spec, dict):
            scale = ScaleSubresource(
                spec_replicas_path=str(scale_spec.get("specReplicasPath", ".spec.replicas")),
                status_replicas_path=str(scale_spec.get("statusReplicasPath", ".status.replicas")),
                label_selector_path=scale_spec.get("labelSelectorPath"),
            )
        columns = version.get("additionalPrinterColumns")
        if columns is None:
            # The apiserver's default for a CRD without printer columns is a single Age column.
            columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        types.append(
            ResourceType(
                group=group,
                version=str(version.get("name", "")),
                kind=kind,
                plural=plural,
                singular=singular,
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                builtin=False,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status_subresource="status" in subresources,
                scale=scale,
                printer_columns=tuple(dict(c) for c in columns),
                schema=((version.get("schema") or {}).get("openAPIV3Schema")),
                deprecated=bool(version.get("deprecated", False)),
                deprecation_warning=version.get("deprecationWarning"),
                storage=bool(version.get("storage", False)),
            )
        )
    return types


class Registry:
    """The served resource types, looked up the ways requests and objects name them."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}
        self._storage: dict[StorageKey, ResourceType | None] = {}
        self.revision = 0
        """Bumped on every change; discovery and OpenAPI documents hash on it."""
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt
        self._storage.clear()
        self.revision += 1

    def remove(self, rt: ResourceType) -> None:
        self._by_gvr.pop((rt.group, rt.version, rt.plural), None)
        self._storage.clear()
        self.revision += 1

    def by_plural(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._by_gvr.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    def versions_of(self, group: str, plural: str) -> list[ResourceType]:
        """Every served version of a resource, preferred (kube-aware highest) first."""
        found = [rt for rt in self._by_gvr.values() if rt.group == group and rt.plural == plural]
        return sorted(found, key=lambda rt: version_priority(rt.version))

    def storage_type(self, group: str, plural: str) -> ResourceType | None:
        """The version objects of a resource are stored in (cached: every write asks)."""
        key = (group, plural)
        if key not in self._storage:
            versions = self.versions_of(group, plural)
            stored = [rt for rt in versions if rt.storage]
            self._storage[key] = stored[0] if stored else (versions[0] if versions else None)
        return self._storage[key]

    def groups(self) -> dict[str, list[str]]:
        """group -> its served versions, preferred first ("" is the core group)."""
        versions: dict[str, set[str]] = {}
        for rt in self._by_gvr.values():
            versions.setdefault(rt.group, set()).add(rt.version)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(versions.items())}

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return sorted(
            (rt for rt in self._by_gvr.values() if rt.group == group and rt.version == version),
            key=lambda rt: rt.plural,
        )

    # --- CustomResourceDefinitions ------------------------------------------------------------
    def register_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """(Re-)registers the served versions of `crd`; versions no longer served disappear."""
        name = str((crd.get("metadata") or {}).get("name", ""))
        self.unregister_crd(name)
        types = crd_resource_types(crd)
        for rt in types:
            self.add(rt)
        self._crd_types[name] = types
        return types

    def unregister_crd(self, name: str) -> list[ResourceType]:
        types = self._crd_types.pop(name, [])
        for rt in types:
            self.remove(rt)
        return types

    def crd_types(self, name: str) -> list[ResourceType]:
        return list(self._crd_types.get(name, []))
