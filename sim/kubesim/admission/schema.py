"""Compiled schema nodes shared by built-in kinds and CRDs, and the loader of Kubernetes' own
schemas.

Built-in kinds come from the `kubernetes-validate` package, which ships each Kubernetes release's
OpenAPI as JSON Schema 2020-12 (`kubernetes-json-schema/v1.NN.0-local/_definitions.json`, every type
nullable). We load the newest bundled release once, and compile a definition lazily into `Node`s the
first time a kind needs it (the file is 1.8 MB; compiling everything up front would cost start-up
time for kinds nobody uses). CRD `openAPIV3Schema`s compile into the same `Node`s, so one walker
(`structural.py`) serves both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

MISSING: Any = object()
MIN_KUBERNETES_MINOR = 32


@dataclass(eq=False, slots=True)
class Node:
    """One schema node. `types` empty means any JSON type (e.g. `JSON`, `RawExtension`,
    int-or-string)."""

    types: frozenset[str] = frozenset()
    nullable: bool = False
    properties: dict[str, Node] | None = None
    additional: Node | None = None
    additional_any: bool = False
    items: Node | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    format: str | None = None
    go_type: str = ""
    preserve_unknown: bool = False
    embedded: bool = False
    int_or_string: bool = False
    default: Any = MISSING
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    min_length: int | None = None
    max_length: int | None = None
    pattern: re.Pattern[str] | None = None
    pattern_text: str = ""
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    patch_strategy: str = ""
    patch_merge_key: str = ""
    validations: tuple[dict[str, Any], ...] = ()
    all_of: tuple[Node, ...] = field(default=())
    walk_plan: Any = None
    """What `structural.Walker` derives from this node once, on its first walk of a built-in
    kind."""

    def child(self, key: str) -> Node | None:
        if self.properties is not None and key in self.properties:
            return self.properties[key]
        return self.additional


# ----------------------------------------------------------------------------- built-in kinds


@cache
def schema_version() -> str:
    """The newest release bundled by kubernetes-validate (and at least 1.32)."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    versions = []
    for entry in root.iterdir():
        m = re.fullmatch(r"v1\.(\d+)\.(\d+)-local", entry.name)
        if m and int(m.group(1)) >= MIN_KUBERNETES_MINOR:
            versions.append((int(m.group(1)), int(m.group(2)), entry.name))
    if not versions:
        raise RuntimeError("kubernetes-validate bundles no schemas for Kubernetes >= 1.32")
    return max(versions)[2]


@cache
def _definitions() -> dict[str, Any]:
    path = (
        resources.files("kubernetes_validate")
        / "kubernetes-json-schema"
        / schema_version()
        / "_definitions.json"
    )
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


@cache
def _gvk_index() -> dict[tuple[str, str], str]:
    index: dict[tuple[str, str], str] = {}
    for name, definition in _definitions().items():
        for gvk in definition.get("x-kubernetes-group-version-kind", ()):
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            index.setdefault((api_version, gvk["kind"]), name)
    return index


def _go_type_name(definition_name: str) -> str:
    parts = definition_name.split(".")
    return f"{parts[-2]}.{parts[-1]}"


class _BuiltinCompiler:
    def __init__(self) -> None:
        self.defs = _definitions()
        self.compiled: dict[str, Node] = {}

    def ref(self, ref: str) -> Node:
        name = ref.rsplit("/", 1)[-1]
        node = self.compiled.get(name)
        if node is None:
            node = Node()
            self.compiled[name] = (
                node  # registered before filling: definitions are recursive (JSONSchemaProps)
            )
            self.fill(node, self.defs[name], name)
        return node

    def fill(self, node: Node, raw: dict[str, Any], def_name: str = "") -> None:
        if def_name.endswith("api.resource.Quantity"):
            node.types, node.format, node.go_type = (
                frozenset({"string", "number"}),
                "quantity",
                "resource.Quantity",
            )
            return
        if def_name.endswith("util.intstr.IntOrString"):
            node.types, node.int_or_string, node.go_type = frozenset(), True, "intstr.IntOrString"
            return
        raw_type = raw.get("type")
        types = [raw_type] if isinstance(raw_type, str) else list(raw_type or ())
        node.nullable = "null" in types
        node.types = frozenset(t for t in types if t != "null")
        node.format = raw.get("format")
        node.required = tuple(raw.get("required", ()))
        if "enum" in raw:
            node.enum = tuple(v for v in raw["enum"] if v is not None)
        node.list_type = raw.get("x-kubernetes-list-type")
        node.list_map_keys = tuple(raw.get("x-kubernetes-list-map-keys", ()))
        node.patch_strategy = raw.get("x-kubernetes-patch-strategy", "")
        node.patch_merge_key = raw.get("x-kubernetes-patch-merge-key", "")
        if "properties" in raw:
            node.properties = {k: self.prop(v) for k, v in raw["properties"].items()}
        addl = raw.get("additionalProperties")
        if isinstance(addl, dict):
            node.additional = self.prop(addl)
        if "items" in raw:
            node.items = self.prop(raw["items"])
        if not node.types and node.properties is None:
            node.preserve_unknown = True  # JSON, RawExtension, FieldsV1: free-form in Go too
        elif node.types == {"object"} and node.properties is None and node.additional is None:
            node.preserve_unknown = True
        node.go_type = self.go_type(node, def_name)

    def prop(self, raw: dict[str, Any]) -> Node:
        if "$ref" in raw:
            # siblings of a $ref are descriptions (and two patch strategies of kinds we don't serve)
            return self.ref(raw["$ref"])
        node = Node()
        self.fill(node, raw)
        return node

    def go_type(self, node: Node, def_name: str) -> str:
        if def_name:
            return _go_type_name(def_name)
        if "array" in node.types and node.items is not None:
            return "[]" + (node.items.go_type or "interface {}")
        if "object" in node.types and node.additional is not None:
            return "map[string]" + (node.additional.go_type or "interface {}")
        if "integer" in node.types:
            return "int32" if node.format == "int32" else "int64"
        if node.format == "byte":
            return "[]uint8"
        return {"string": "string", "boolean": "bool", "number": "float64"}.get(
            next(iter(node.types), ""), ""
        )


_COMPILER: _BuiltinCompiler | None = None


def builtin_definition(name: str) -> Node:
    """A compiled definition by its OpenAPI name (e.g.
    `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`)."""
    global _COMPILER
    if _COMPILER is None:
        _COMPILER = _BuiltinCompiler()
    return _COMPILER.ref(name)


OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def builtin_schema(api_version: str, kind: str) -> Node | None:
    """The compiled schema of a built-in kind, or None when Kubernetes has no such kind."""
    name = _gvk_index().get((api_version, kind))
    return None if name is None else builtin_definition(name)


_PREFERRED_API_VERSION = {
    "Pod": "v1",
    "Service": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "ServiceAccount": "v1",
    "Namespace": "v1",
    "Event": "v1",
    "Job": "batch/v1",
    "Lease": "coordination.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
}


def builtin_schema_for_kind(kind: str) -> Node | None:
    """Schema lookup by kind alone (what the patch code knows); the kind's usual group-version."""
    api_version = _PREFERRED_API_VERSION.get(kind)
    if api_version is not None:
        return builtin_schema(api_version, kind)
    for (av, k), _ in _gvk_index().items():
        if k == kind:
            return builtin_schema(av, kind)
    return None


# ----------------------------------------------------------------------------- CRD openAPIV3Schema


def compile_crd_schema(raw: dict[str, Any]) -> Node:
    """Compiles a CRD version's openAPIV3Schema (a structural schema: OpenAPI v3 subset +
    x-kubernetes-*)."""
    node = Node()
    t = raw.get("type")
    node.types = frozenset({t}) if isinstance(t, str) and t else frozenset()
    node.nullable = bool(raw.get("nullable", False))
    node.format = raw.get("format")
    node.required = tuple(raw.get("required", ()))
    if "enum" in raw:
        node.enum = tuple(raw["enum"])
    node.preserve_unknown = bool(raw.get("x-kubernetes-preserve-unknown-fields", False))
    node.embedded = bool(raw.get("x-kubernetes-embedded-resource", False))
    node.int_or_string = bool(raw.get("x-kubernetes-int-or-string", False))
    if "default" in raw:
        node.default = raw["default"]
    for attr, key in (("minimum", "minimum"), ("maximum", "maximum")):
        if key in raw:
            setattr(node, attr, raw[key])
    node.exclusive_minimum = bool(raw.get("exclusiveMinimum", False))
    node.exclusive_maximum = bool(raw.get("exclusiveMaximum", False))
    for attr, key in (
        ("min_length", "minLength"),
        ("max_length", "maxLength"),
        ("min_items", "minItems"),
        ("max_items", "maxItems"),
        ("min_properties", "minProperties"),
        ("max_properties", "maxProperties"),
    ):
        if key in raw:
            setattr(node, attr, int(raw[key]))
    node.unique_items = bool(raw.get("uniqueItems", False))
    if "pattern" in raw:
        node.pattern_text = raw["pattern"]
        node.pattern = re.compile(_ecma_to_python(raw["pattern"]))
    node.list_type = raw.get("x-kubernetes-list-type")
    node.list_map_keys = tuple(raw.get("x-kubernetes-list-map-keys", ()))
    node.validations = tuple(raw.get("x-kubernetes-validations", ()))
    if "properties" in raw:
        node.properties = {k: compile_crd_schema(v) for k, v in raw["properties"].items()}
    addl = raw.get("additionalProperties")
    if isinstance(addl, dict):
        node.additional = compile_crd_schema(addl)
    elif addl is True:
        node.additional_any = True
    items = raw.get("items")
    if isinstance(items, dict):
        node.items = compile_crd_schema(items)
    node.all_of = tuple(compile_crd_schema(s) for s in raw.get("allOf", ()) if isinstance(s, dict))
    return node


def _ecma_to_python(pattern: str) -> str:
    """CRD patterns are ECMA-262 (Go's RE2 in practice); the common subset reads the same in
    Python."""
    return pattern.replace("\\d", "[0-9]")
