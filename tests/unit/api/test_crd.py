"""The generated MPIJob CRD: drift from the models, apiextensions validity, and its contract
(versions, subresources, printer columns, CEL rules; docs/api-reference.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mpi_operator.api import constants as c
from mpi_operator.api import crd

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / crd.FILE_NAME


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    return crd.custom_resource_definition()


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (properties, items, additionalProperties)."""
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


def test_crds_folder_matches_the_models() -> None:
    assert CRD_FILE.read_text(encoding="utf-8") == crd.render(), (
        "crds/ drifted from the models: run `mpi-operator crds --out crds`"
    )


def test_cli_prints_and_writes_the_same_crd(tmp_path: Path) -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "crds"], capture_output=True, text=True, check=True
    )
    assert printed.stdout == CRD_FILE.read_text(encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "mpi_operator", "crds", "--out", str(tmp_path)],
        capture_output=True,
        check=True,
    )
    assert (tmp_path / crd.FILE_NAME).read_text(encoding="utf-8") == printed.stdout


def test_is_a_valid_apiextensions_v1_object(generated: dict[str, Any]) -> None:
    # Kubernetes' own OpenAPI schema of CustomResourceDefinition; strict refuses unknown fields.
    kubernetes_validate.validate(generated, "1.32.0", strict=True)
    docs = list(yaml.safe_load_all(CRD_FILE.read_text(encoding="utf-8")))
    assert docs == [generated]


def test_names_scope_and_conversion(generated: dict[str, Any]) -> None:
    spec = generated["spec"]
    assert generated["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert spec["group"] == "kubeflow.org"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "MPIJob",
        "listKind": "MPIJobList",
        "plural": "mpijobs",
        "singular": "mpijob",
        "shortNames": ["mpij", "mj"],
        "categories": ["kubeflow"],
    }
    assert spec["conversion"] == {"strategy": "None"}


def test_versions_share_one_schema_and_only_v2beta1_is_stored(generated: dict[str, Any]) -> None:
    versions = {v["name"]: v for v in generated["spec"]["versions"]}
    assert list(versions) == ["v2beta1", "v1", "v1alpha2", "v1alpha1"]
    assert [name for name, v in versions.items() if v["storage"]] == ["v2beta1"]
    assert all(v["served"] for v in versions.values())
    assert not versions["v2beta1"].get("deprecated", False)
    # v1 ranks above v2beta1, so `kubectl get mpij` reads through it: marked deprecated, it would
    # warn on every plain get (docs/migration.md, "Quiet kubectl").
    assert not versions["v1"].get("deprecated", False)
    for name in ("v1alpha2", "v1alpha1"):
        assert versions[name]["deprecated"] is True
        assert "v2beta1" in versions[name]["deprecationWarning"]
    schemas = [v["schema"]["openAPIV3Schema"] for v in versions.values()]
    assert all(s == schemas[0] for s in schemas)


def test_status_and_scale_subresources(generated: dict[str, Any]) -> None:
    for version in generated["spec"]["versions"]:
        assert version["subresources"] == {
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.mpiReplicaSpecs.Worker.replicas",
                "statusReplicasPath": ".status.replicaStatuses.Worker.active",
                "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
            },
        }


def test_scale_paths_exist_in_the_schema(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    paths = dict(_walk(schema))
    assert paths[".spec.mpiReplicaSpecs.Worker.replicas"]["type"] == "integer"
    assert paths[".status.replicaStatuses.Worker.active"]["type"] == "integer"
    assert paths[".status.replicaStatuses.Worker.selector"]["type"] == "string"
    assert paths[".status.replicaStatuses.Worker.ready"]["type"] == "integer"
    assert paths[".status.observedGeneration"]["type"] == "integer"


def test_printer_columns(generated: dict[str, Any]) -> None:
    columns = generated["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(col["name"], col["jsonPath"]) for col in columns] == [
        ("State", ".status.conditions[-1:].type"),
        ("Workers", ".spec.mpiReplicaSpecs.Worker.replicas"),
        ("Ready", ".status.replicaStatuses.Worker.ready"),
        ("Discovered", ".status.elastic.discovered"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_schema_is_structural(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert not {"$ref", "title", "$defs"} & node.keys(), path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "anyOf" not in node, path
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, (
            path
        )
        if "properties" in node:
            assert "additionalProperties" not in node, path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert "additionalProperties" not in node, path


def test_pod_templates_are_embedded_and_preserved(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    paths = dict(_walk(schema))
    for path in (
        ".spec.mpiReplicaSpecs.Launcher.template",
        ".spec.mpiReplicaSpecs.Worker.template",
    ):
        assert paths[path]["x-kubernetes-preserve-unknown-fields"] is True
        assert paths[path]["x-kubernetes-embedded-resource"] is True
        assert paths[path]["type"] == "object"


def test_every_field_is_described(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    undocumented = [
        path
        for path, node in _walk(schema)
        if path.startswith((".spec", ".status")) and "[]" not in path and "{}" not in path
        if not node.get("description")
    ]
    assert undocumented == []
    explain = dict(_walk(schema))[".spec.elasticPolicy"]["description"]
    assert "elastic" in explain.lower()


def test_legacy_fields_are_kept_by_the_superset_schema(generated: dict[str, Any]) -> None:
    spec = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for legacy in ("cleanPodPolicy", "mainContainer", "mpiDistribution", "gpus", "gpusPerNode",
                   "processingUnits", "processingResourceType", "replicas", "template",
                   "backoffLimit", "activeDeadlineSeconds"):  # fmt: skip
        assert legacy in spec["properties"], legacy
        assert "Deprecated" in spec["properties"][legacy]["description"]
    # A v1alpha1 manifest has no mpiReplicaSpecs, so the schema cannot require it (a CEL rule does).
    assert "required" not in spec


def test_defaults_are_only_those_without_meaning_when_unset(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    defaulted = {
        path.lstrip("."): node["default"] for path, node in _walk(schema) if "default" in node
    }
    assert "spec.slotsPerWorker" not in defaulted  # unset means "the GPUs per worker"
    assert "spec.mpiImplementation" not in defaulted  # a legacy mpiDistribution must win
    assert (
        "spec.runPolicy.cleanPodPolicy" not in defaulted
    )  # a legacy top-level cleanPodPolicy must win
    assert "spec.mpiReplicaSpecs.Worker.replicas" not in defaulted
    assert defaulted["spec.launcherCreationPolicy"] == c.LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY
    assert defaulted["spec.mpiReplicaSpecs.Launcher.replicas"] == 1


def test_cel_rules_cover_the_admission_invariants(generated: dict[str, Any]) -> None:
    schema = generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    spec_messages = {rule["message"] for rule in spec["x-kubernetes-validations"]}
    assert {
        "Worker replicas must be >= elasticPolicy.minReplicas",
        "Worker replicas must be <= elasticPolicy.maxReplicas",
    } <= spec_messages
    # Each bound is named in the message, which the rule's messageExpression builds.
    assert all(
        "string(self.elasticPolicy." in rule["messageExpression"]
        for rule in spec["x-kubernetes-validations"]
        if rule["message"].startswith("Worker replicas")
    )
    worker = spec["properties"]["mpiReplicaSpecs"]["properties"]["Worker"]["properties"]
    assert worker["replicas"]["minimum"] == 1
    elastic = spec["properties"]["elasticPolicy"]["x-kubernetes-validations"]
    assert [r["message"] for r in elastic] == ["minReplicas must be <= maxReplicas"]
    launcher = spec["properties"]["mpiReplicaSpecs"]["properties"]["Launcher"]["properties"][
        "replicas"
    ]
    assert (launcher["minimum"], launcher["maximum"]) == (1, 1)
    assert "metadata.name" in schema["x-kubernetes-validations"][0]["message"]
