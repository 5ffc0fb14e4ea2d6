"""kubesim.registry and kubesim.table: CRD registration, version priority, scale paths, printer
helpers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubesim import builtins, table
from kubesim.registry import Registry, get_path, set_path, version_priority


def crd(*versions: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {
                "plural": "things",
                "singular": "thing",
                "kind": "Thing",
                "shortNames": ["th"],
            },
            "versions": list(versions),
        },
    }


def test_kube_aware_version_order() -> None:
    versions = ["v1alpha1", "v2beta1", "v1", "foo", "v1beta2", "v2", "v1beta1", "v10"]
    assert sorted(versions, key=version_priority) == [
        "v10",
        "v2",
        "v1",
        "v2beta1",
        "v1beta2",
        "v1beta1",
        "v1alpha1",
        "foo",
    ]


def test_crd_registers_served_versions_only() -> None:
    registry = Registry(builtins.BUILTIN_TYPES)
    types = registry.register_crd(
        crd(
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
            {"name": "v1beta1", "served": False, "storage": False},
        )
    )
    assert [rt.version for rt in types] == ["v1"]
    thing = registry.by_plural("example.com", "v1", "things")
    assert thing is not None
    assert (thing.kind, thing.namespaced, thing.status_subresource, thing.short_names) == (
        "Thing",
        False,
        True,
        ("th",),
    )
    assert registry.by_kind("example.com/v1", "Thing") == thing
    assert registry.by_plural("example.com", "v1beta1", "things") is None


def test_crd_without_printer_columns_gets_age() -> None:
    registry = Registry()
    (thing,) = registry.register_crd(crd({"name": "v1", "served": True, "storage": True}))
    assert [c["name"] for c in thing.printer_columns] == ["Age"]


def test_reregistering_replaces_and_unregistering_removes() -> None:
    registry = Registry()
    registry.register_crd(crd({"name": "v1", "served": True, "storage": True}))
    revision = registry.revision
    registry.register_crd(
        crd(
            {"name": "v1", "served": True, "storage": False},
            {"name": "v2", "served": True, "storage": True},
        )
    )
    assert registry.groups() == {"example.com": ["v2", "v1"]}
    storage = registry.storage_type("example.com", "things")
    assert storage is not None
    assert storage.version == "v2"
    assert registry.revision > revision
    registry.unregister_crd("things.example.com")
    assert registry.all() == []


def test_scale_paths_read_and_write_nested_fields() -> None:
    obj: dict[str, Any] = {"spec": {}}
    set_path(obj, ".spec.replicaSpecs.Worker.replicas", 3)
    assert obj == {"spec": {"replicaSpecs": {"Worker": {"replicas": 3}}}}
    assert get_path(obj, ".spec.replicaSpecs.Worker.replicas") == 3
    assert get_path(obj, ".status.replicas") is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (100 * 86400, "100d"),
        (800 * 86400, "2y70d"),
    ],
    ids=lambda v: str(v),
)
def test_human_duration_matches_apimachinery(seconds: int, text: str) -> None:
    assert table.human_duration(seconds) == text


DOC = {
    "metadata": {"name": "x", "labels": {"a.b/c": "d"}},
    "spec": {"replicas": 2, "items": [{"n": 1}, {"n": 2}]},
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Done", "status": "True"}]
    },
}


@pytest.mark.parametrize(
    ("path", "values"),
    [
        (".spec.replicas", [2]),
        ("{.spec.replicas}", [2]),
        (".metadata.labels['a.b/c']", ["d"]),
        (".spec.items[1].n", [2]),
        (".spec.items[*].n", [1, 2]),
        ('.status.conditions[?(@.type=="Done")].status', ["True"]),
        (".status.conditions[?(@.type!='Done')].type", ["Ready"]),
        (".status.conditions[-1:].type", ["Done"]),
        (".spec.items[0:1].n", [1]),
        (".spec.items[:].n", [1, 2]),
        (".spec.items[-5:].n", [1, 2]),
        (".spec.missing", []),
        (".spec[", []),
    ],
    ids=[
        "field",
        "braces",
        "quoted-key",
        "index",
        "star",
        "filter",
        "filter-not",
        "slice-last",
        "slice-range",
        "slice-all",
        "slice-past-start",
        "missing",
        "malformed",
    ],
)
def test_printer_column_jsonpath(path: str, values: list[Any]) -> None:
    assert table.jsonpath(DOC, path) == values


def test_custom_table_cells_follow_column_types() -> None:
    registry = Registry()
    columns = [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Items", "type": "string", "jsonPath": ".spec.items"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    (thing,) = registry.register_crd(
        crd({"name": "v1", "served": True, "storage": True, "additionalPrinterColumns": columns})
    )
    now = datetime(2026, 1, 1, 0, 2, 5, tzinfo=UTC)
    obj = {**DOC, "metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert table.cells(thing, obj, now) == ["x", 2, '[{"n":1},{"n":2}]', "2m5s"]
