"""Custom resources against their CRD version's structural schema, and the CRD objects themselves.

`admit_custom` does what apiextensions-apiserver does to a custom resource: keep `apiVersion`,
`kind` and `metadata` (metadata decoded as ObjectMeta, unknown metadata fields dropped), prune
unknown fields, apply defaults, validate the OpenAPI constraints, then run the CEL rules.
`crd_errors` checks a CustomResourceDefinition's schemas are structural enough for kubesim to serve
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubesim import names
from kubesim.admission import cel
from kubesim.admission.builtin import validate_metadata
from kubesim.admission.fielderrors import Cause, FieldErrors
from kubesim.admission.schema import (
    MISSING,
    OBJECT_META,
    Node,
    builtin_definition,
    compile_crd_schema,
)
from kubesim.admission.structural import Walker

_ROOT_KEYS = ("apiVersion", "kind", "metadata")
_CACHE: dict[int, tuple[dict[str, Any], Node]] = {}
_CACHE_LIMIT = 128


def crd_node(schema: dict[str, Any]) -> Node:
    """Compiled schema, cached per schema object (the registry keeps one dict per served
    version)."""
    hit = _CACHE.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.pop(next(iter(_CACHE)))
    node = compile_crd_schema(schema)
    _CACHE[id(schema)] = (schema, node)
    return node


@dataclass
class CustomOutcome:
    obj: dict[str, Any]
    causes: list[Cause]
    unknown: list[str]
    decode_error: str | None
    warnings: list[str] = field(default_factory=list)


def admit_custom(
    kind: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    schema: dict[str, Any],
    *,
    create: bool,
) -> CustomOutcome:
    root = crd_node(schema)
    walker = Walker(builtin=False, collect_cel=True)
    body = {k: v for k, v in obj.items() if k not in _ROOT_KEYS}
    old_body: Any = (
        {k: v for k, v in old.items() if k not in _ROOT_KEYS} if old is not None else MISSING
    )
    cleaned = walker.walk(body, root, "", old_body)
    if not isinstance(cleaned, dict):
        cleaned = {}

    meta_walker = Walker(builtin=True)
    meta_node = builtin_definition(OBJECT_META)
    metadata = meta_walker.walk(
        obj.get("metadata") or {}, meta_node, "metadata", go=("ObjectMeta", "")
    )
    metadata = metadata if isinstance(metadata, dict) else {}
    if root.properties and "metadata" in root.properties:
        # a CRD may only constrain metadata.name / generateName; check them without pruning anything
        check = Walker(builtin=False, defaults=False)
        check.walk(
            {k: metadata[k] for k in ("name", "generateName") if k in metadata},
            root.properties["metadata"],
            "metadata",
        )
        walker.errors.extend(check.errors)

    result: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    result["metadata"] = metadata
    result.update(cleaned)
    errs = walker.errors
    validate_metadata(kind, metadata, errs)

    for site in walker.cel_sites:
        if site.path == "":
            site.value = {**site.value, **{k: obj[k] for k in ("apiVersion", "kind") if k in obj}}
            site.value["metadata"] = {
                k: metadata[k] for k in ("name", "generateName") if k in metadata
            }
    outcome = cel.evaluate(walker.cel_sites)
    return CustomOutcome(
        obj=result,
        causes=[*errs.causes, *outcome.causes],
        unknown=[*meta_walker.unknown, *walker.unknown],
        decode_error=meta_walker.decode_error,
        warnings=outcome.warnings,
    )


_TYPES = ("object", "array", "string", "integer", "number", "boolean")


def _structural(raw: Any, path: str, errs: FieldErrors, *, root: bool = False) -> None:
    if not isinstance(raw, dict):
        return
    t = raw.get("type", "")
    if root and t != "object":
        if not t:
            errs.required(f"{path}.type", "must not be empty at the root")
        else:
            errs.invalid(f"{path}.type", t, "must be object at the root")
    if t and t not in _TYPES:
        errs.not_supported(f"{path}.type", t, _TYPES)
    for name, sub in (raw.get("properties") or {}).items():
        p = f"{path}.properties[{name}]"
        if (
            isinstance(sub, dict)
            and not sub.get("type")
            and not (
                sub.get("x-kubernetes-preserve-unknown-fields")
                or sub.get("x-kubernetes-int-or-string")
            )
        ):
            errs.required(f"{p}.type", "must not be empty for specified object fields")
        _structural(sub, p, errs)
    items = raw.get("items")
    if t == "array" and not isinstance(items, dict):
        errs.required(f"{path}.items", "must be specified")
    elif isinstance(items, dict):
        if not items.get("type") and not (
            items.get("x-kubernetes-preserve-unknown-fields")
            or items.get("x-kubernetes-int-or-string")
        ):
            errs.required(f"{path}.items.type", "must not be empty for specified array items")
        _structural(items, f"{path}.items", errs)
    addl = raw.get("additionalProperties")
    if isinstance(addl, dict):
        if raw.get("properties"):
            errs.forbidden(
                f"{path}.additionalProperties",
                "additionalProperties and properties are mutual exclusive",
            )
        _structural(addl, f"{path}.additionalProperties", errs)
    if "pattern" in raw:
        try:
            re.compile(str(raw["pattern"]))
        except re.error as e:
            errs.invalid(
                f"{path}.pattern",
                raw["pattern"],
                f"must be a valid regular expression, but isn't: {e}",
            )
    if raw.get("x-kubernetes-list-type") == "map" and not raw.get("x-kubernetes-list-map-keys"):
        errs.required(
            f"{path}.x-kubernetes-list-map-keys",
            "must not be empty if x-kubernetes-list-type is map",
        )


def crd_errors(crd: dict[str, Any], errs: FieldErrors) -> None:
    spec = crd.get("spec") or {}
    group = spec.get("group", "")
    if not group:
        errs.required("spec.group")
    else:
        for msg in names.is_dns1123_subdomain(group):
            errs.invalid("spec.group", group, msg)
        if "." not in group:
            errs.invalid("spec.group", group, "should be a domain with at least one dot")
    scope = spec.get("scope", "")
    if scope not in ("Cluster", "Namespaced"):
        errs.not_supported("spec.scope", scope, ("Cluster", "Namespaced"))
    crd_names = spec.get("names") or {}
    for key in ("plural", "singular"):
        value = crd_names.get(key, "")
        if value:
            for msg in names.is_dns1123_label(value):
                errs.invalid(f"spec.names.{key}", value, msg)
    if not crd_names.get("kind"):
        errs.required("spec.names.kind")
    seen: set[str] = set()
    versions = spec.get("versions") or []
    if not versions:
        errs.invalid(
            "spec.versions", versions, "must have exactly one version marked as storage version"
        )
    for i, version in enumerate(versions):
        name = version.get("name", "")
        if name in seen:
            errs.duplicate(f"spec.versions[{i}].name", name)
        seen.add(name)
        for msg in names.is_dns1035_label(name):
            errs.invalid(f"spec.versions[{i}].name", name, msg)
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        if schema is None:
            errs.required(path, "schemas are required")
            continue
        _structural(schema, path, errs, root=True)
        errs.causes.extend(cel.compile_errors(schema, path))
