"""The MPIJob API reference (`docs/api-reference.md`), generated from the models and the CRD
generator.

Pure: the pydantic models' JSON schema (`MPIJob`, and `LegacySpecFields` for the deprecated fields)
and `crd.custom_resource_definition()` (versions, scale subresource, printer columns, CEL rules) in,
markdown out. `python -m mpi_operator.api.docgen > docs/api-reference.md` regenerates the file; a
test fails when the two drift, so the reference follows the models without anyone editing it by
hand.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.crd import custom_resource_definition
from mpi_operator.api.legacy import LEGACY_STATUS_KEYS, LegacySpecFields
from mpi_operator.api.models import MPIJob

REGENERATE: Final = "python -m mpi_operator.api.docgen > docs/api-reference.md"

LEGACY_EQUIVALENTS: Final[Mapping[str, str]] = {
    "gpus": "`mpiReplicaSpecs.Worker.replicas` = gpus / gpusPerNode, `nvidia.com/gpu` limits of "
    "`containers[0]` = gpusPerNode, `slotsPerWorker` = gpusPerNode",
    "gpusPerNode": "the Worker `containers[0]` `nvidia.com/gpu` limit and `slotsPerWorker`",
    "processingUnits": "like `gpus`, for the resource named by `processingResourceType`",
    "processingUnitsPerNode": "like `gpusPerNode`, for `processingResourceType`",
    "processingResourceType": "the resource name in the Worker `containers[0]` limits",
    "replicas": "`mpiReplicaSpecs.Worker.replicas`",
    "template": "`mpiReplicaSpecs.Launcher.template` (without resources) and "
    "`mpiReplicaSpecs.Worker.template` (command `/usr/sbin/sshd -De`)",
    "launcherOnMaster": "control-plane tolerations and node affinity in "
    "`mpiReplicaSpecs.Launcher.template`",
    "backoffLimit": "`runPolicy.backoffLimit`",
    "activeDeadlineSeconds": "`runPolicy.activeDeadlineSeconds`",
    "cleanPodPolicy": "`runPolicy.cleanPodPolicy`",
    "mainContainer": "`containers[0]`: the named container is moved first",
    "mpiDistribution": "`mpiImplementation` (`IntelMPI`/`intel_mpi` → `Intel`, `open_mpi` → "
    "`OpenMPI`, "
    "`mpich` → `MPICH`)",
}
"""The v2beta1 equivalent of every legacy spec field (keyed by its JSON name), as the operator maps
it."""

_HEADER: Final = ("Field", "Type", "Default", "Validation", "Description")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    return [_row(header), _row(tuple("---" for _ in header)), *(_row(r) for r in rows)]


def _anchor(name: str) -> str:
    return name.lower()


def _ref_name(prop: Mapping[str, Any]) -> str | None:
    ref = prop.get("$ref")
    return str(ref).rsplit("/", 1)[-1] if ref else None


def _type(prop: Mapping[str, Any]) -> str:
    """A Go-like type name for one JSON schema property: `[]JobCondition`, `map[string]quantity`,
    ..."""
    if (name := _ref_name(prop)) is not None:
        return f"[{name}](#{_anchor(name)})"
    if prop.get("x-kubernetes-int-or-string"):
        return "quantity (int or string)"
    kind = prop.get("type")
    if kind == "array":
        return "[]" + _type(prop.get("items", {}))
    if kind == "object":
        if prop.get("x-kubernetes-embedded-resource"):
            return "object (PodTemplateSpec)"
        values = prop.get("additionalProperties")
        if isinstance(values, Mapping):
            return "map[string]" + _type(values)
        return "object"
    if kind == "string" and prop.get("format") == "date-time":
        return "string (RFC 3339 time)"
    return str(kind) if kind else "any"


def _validation(prop: Mapping[str, Any], required: bool) -> str:
    rules = ["required"] if required else []
    if "enum" in prop:
        rules.append("one of " + ", ".join(f"`{x}`" for x in prop["enum"]))
    for key, word in (("minimum", "≥"), ("maximum", "≤")):
        if key in prop:
            rules.append(f"{word} {prop[key]}")
    if "minLength" in prop:
        rules.append(f"length ≥ {prop['minLength']}")
    if prop.get("x-kubernetes-list-type") == "map":
        keys = ", ".join(prop.get("x-kubernetes-list-map-keys", []))
        rules.append(f"list map keyed by {keys}")
    return "; ".join(rules)


def _default(prop: Mapping[str, Any]) -> str:
    return f"`{json.dumps(prop['default'])}`" if "default" in prop else ""


def _type_sections(schema: Mapping[str, Any]) -> Iterator[str]:
    """One section per object type, breadth-first from the root, in field order."""
    defs: Mapping[str, Any] = schema.get("$defs", {})
    queue: list[tuple[str, Mapping[str, Any]]] = [(str(schema.get("title", c.KIND)), schema)]
    seen = {name for name, _ in queue}
    while queue:
        name, node = queue.pop(0)
        required = set(node.get("required", []))
        rows: list[tuple[str, ...]] = []
        for field, prop in node.get("properties", {}).items():
            rows.append(
                (
                    f"`{field}`",
                    _type(prop),
                    _default(prop),
                    _validation(prop, field in required),
                    str(prop.get("description", "")),
                )
            )
            for nested in (prop, prop.get("items", {}), prop.get("additionalProperties", {})):
                target = _ref_name(nested) if isinstance(nested, Mapping) else None
                if target is not None and target not in seen:
                    seen.add(target)
                    queue.append((target, defs[target]))
        yield "\n".join(
            [f"### {name}", "", str(node.get("description", "")), "", *_table(_HEADER, rows)]
        )


def _legacy_section() -> str:
    schema = LegacySpecFields.model_json_schema(by_alias=True)
    rows = [
        (
            f"`spec.{field}`",
            _type(prop),
            _validation(prop, False),
            LEGACY_EQUIVALENTS[field],
            str(prop.get("description", "")),
        )
        for field, prop in schema["properties"].items()
    ]
    status = ", ".join(f"`status.{key}`" for key in LEGACY_STATUS_KEYS)
    return "\n".join(
        [
            "## Deprecated fields (`v1`, `v1alpha2`, `v1alpha1`)",
            "",
            "Every served version shares one superset schema, so these fields are stored as "
            "written "
            "under any `apiVersion`. The operator maps them onto the v2beta1 fields below on every "
            "sync "
            "(never writing the MPIJob back) and records one Normal `LegacyFieldsMapped` event per "
            "generation. When a legacy field and its v2beta1 equivalent are both set, the v2beta1 "
            "field "
            "wins and `mpi-operator validate` warns.",
            "",
            *_table(("Field", "Type", "Validation", "v2beta1 equivalent", "Description"), rows),
            "",
            f"The legacy status fields {status} are dropped: the operator rewrites status in the "
            "v2beta1 "
            "shape (`status.replicaStatuses`).",
        ]
    )


_NOT_DEPRECATED: Final = "old, not marked deprecated: plain `kubectl get mpij` reads through it"


def _crd_section(crd: Mapping[str, Any]) -> str:
    spec = crd["spec"]
    names = spec["names"]
    versions = [
        (
            f"`{v['name']}`",
            "yes" if v["served"] else "no",
            "yes" if v["storage"] else "no",
            str(v.get("deprecationWarning", "")) or ("" if v["storage"] else _NOT_DEPRECATED),
        )
        for v in spec["versions"]
    ]
    storage = next(v for v in spec["versions"] if v["storage"])
    scale = storage["subresources"]["scale"]
    columns = [
        (str(col["name"]), f"`{col['jsonPath']}`", str(col.get("description", "")))
        for col in storage.get("additionalPrinterColumns", [])
    ]
    return "\n".join(
        [
            "## The CustomResourceDefinition",
            "",
            f"`{crd['metadata']['name']}`: group `{spec['group']}`, kind `{names['kind']}`, scope "
            f"{spec['scope']}, plural `{names['plural']}`, short names "
            + ", ".join(f"`{x}`" for x in names.get("shortNames", []))
            + ", categories "
            + ", ".join(f"`{x}`" for x in names.get("categories", []))
            + ". Conversion strategy `None`: one schema serves every version.",
            "",
            *_table(("Version", "Served", "Storage", "Deprecation warning"), versions),
            "",
            "Subresources: `status`, and `scale` with `specReplicasPath: "
            f"{scale['specReplicasPath']}`, `statusReplicasPath: {scale['statusReplicasPath']}`, "
            f"`labelSelectorPath: {scale['labelSelectorPath']}`.",
            "",
            "Printer columns (`kubectl get mpijobs`):",
            "",
            *_table(("Column", "JSON path", "Description"), columns),
            "",
            "Admission rules (CEL, `x-kubernetes-validations`), checked by the API server on "
            "create, "
            "update, patch and scale:",
            "",
            *_table(
                ("Object", "Rule", "Message"),
                list(_cel_rules(storage["schema"]["openAPIV3Schema"], "")),
            ),
        ]
    )


def _cel_rules(node: Any, path: str) -> Iterator[tuple[str, ...]]:
    if not isinstance(node, Mapping):
        return
    for rule in node.get("x-kubernetes-validations", []):
        yield f"`{path or '.'}`", f"`{rule['rule']}`", str(rule.get("message", ""))
    for field, child in node.get("properties", {}).items():
        yield from _cel_rules(child, f"{path}.{field}")
    if "items" in node:
        yield from _cel_rules(node["items"], f"{path}[*]")


def api_reference() -> str:
    """The whole of `docs/api-reference.md`."""
    schema = MPIJob.model_json_schema(by_alias=True)
    parts = [
        "# MPIJob API reference",
        "",
        f"<!-- Generated from the API models by `{REGENERATE}`; do not edit by hand. -->",
        "",
        f"`{c.API_VERSION}` `{c.KIND}`: the canonical version. Types are named as in the upstream "
        "Go API; "
        "a field without a default is absent unless set. Defaults that depend on other fields "
        "(slots "
        "from GPUs, elastic bounds inferred from `horovodrun`) are applied by the operator and "
        "described "
        "in the Description column.",
        "",
        "## Types",
        "",
        "\n\n".join(_type_sections(schema)),
        "",
        _legacy_section(),
        "",
        _crd_section(custom_resource_definition()),
        "",
    ]
    return "\n".join(parts)


def main() -> None:
    sys.stdout.write(api_reference())


if __name__ == "__main__":
    main()
