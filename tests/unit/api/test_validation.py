"""Validation rejects every invalid manifest with exact field paths, all problems at once
(upstream's validation tests, and more)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpi_operator.api import InvalidMPIJob, normalize, parse_and_validate, validate
from mpi_operator.api.normalize import LAST_APPLIED, unknown_fields
from mpi_operator.api.validation import FieldError, format_path, is_under, merge_errors

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"

W = "spec.mpiReplicaSpecs.Worker"
L = "spec.mpiReplicaSpecs.Launcher"

# file in tests/manifests/invalid -> the exact set of error paths
INVALID_FILES: dict[str, set[str]] = {
    "name-too-long": {"metadata.name"},
    "name-starts-with-digit": {"metadata.name"},
    "elastic-name-too-long-at-max": {"metadata.name"},
    "launcher-replicas-two": {f"{L}.replicas"},
    "workers-zero": {f"{W}.replicas"},
    "worker-replicas-omitted": {f"{W}.replicas"},
    "worker-replicas-string": {f"{W}.replicas"},
    "restart-policy-unsupported": {f"{L}.restartPolicy", f"{W}.restartPolicy"},
    "worker-without-containers": {f"{W}.template.spec.containers"},
    "container-without-image": {f"{L}.template.spec.containers[0].image"},
    "template-not-object": {f"{W}.template"},
    "clean-pod-policy-unsupported": {"spec.runPolicy.cleanPodPolicy"},
    "slots-per-worker-negative": {"spec.slotsPerWorker"},
    "run-policy-negative": {
        "spec.runPolicy.ttlSecondsAfterFinished",
        "spec.runPolicy.activeDeadlineSeconds",
        "spec.runPolicy.backoffLimit",
    },
    "managed-by-unsupported": {"spec.runPolicy.managedBy"},
    "scheduling-policy-invalid": {
        "spec.runPolicy.schedulingPolicy.minAvailable",
        "spec.runPolicy.schedulingPolicy.minResources.cpu",
    },
    "ssh-auth-mount-path-empty": {"spec.sshAuthMountPath"},
    "mpi-implementation-unsupported": {"spec.mpiImplementation"},
    "launcher-creation-policy-unsupported": {"spec.launcherCreationPolicy"},
    "elastic-min-zero": {"spec.elasticPolicy.minReplicas"},
    "elastic-max-below-min": {"spec.elasticPolicy.maxReplicas", f"{W}.replicas"},
    "elastic-replicas-above-max": {f"{W}.replicas"},
    "elastic-max-missing": {"spec.elasticPolicy.maxReplicas"},
    "elastic-without-worker": {W},
    "missing-spec": {"spec"},
    "missing-mpi-replica-specs": {"spec.mpiReplicaSpecs"},
    "missing-launcher": {L},
    "unknown-api-version": {"apiVersion"},
    "wrong-kind": {"kind"},
    "v1-legacy-fields-invalid": {"spec.cleanPodPolicy", "spec.mpiDistribution"},
    "v1alpha1-gpus-not-multiple": {"spec.gpus"},
    "v1alpha1-replicas-and-gpus": {"spec.gpus", "spec.template.spec.containers"},
    "many-problems": {
        "metadata.name",
        "spec.slotsPerWorker",
        "spec.runLauncherAsWorker",
        "spec.runPolicy.backoffLimit",
        f"{L}.replicas",
        f"{W}.template.spec.containers",
        f"{W}.replicas",
    },
}


def _load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def test_every_invalid_manifest_is_in_the_table() -> None:
    assert {p.stem for p in (MANIFESTS / "invalid").glob("*.yaml")} == set(INVALID_FILES)
    assert len(INVALID_FILES) >= 15


@pytest.mark.parametrize(("name", "paths"), INVALID_FILES.items(), ids=list(INVALID_FILES))
def test_invalid_manifest_is_rejected_with_exact_paths(name: str, paths: set[str]) -> None:
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(_load(MANIFESTS / "invalid" / f"{name}.yaml"), gpus_per_node=8)
    errors = caught.value.errors
    assert {e.path for e in errors} == paths, [str(e) for e in errors]
    assert len(errors) == len(paths), "one error per path"
    assert all(str(e) == f"{e.path}: {e.message}" and e.message for e in errors)


# Inline cases: upstream's validation_test names, plus wrong types deep inside the spec.
def _job(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox"}
    base: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "foo"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [container]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}},
            }
        },
    }
    base["spec"].update(spec)
    return base


INLINE: dict[str, tuple[Any, dict[str, str]]] = {
    "empty job": (
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"},
        {"metadata.name": "Required value", "spec": "Required value"},
    ),
    "empty replica specs": (_job(mpiReplicaSpecs={}), {L: "Required value"}),
    "missing replica spec fields": (
        _job(mpiReplicaSpecs={"Launcher": {}, "Worker": {}}),
        {
            f"{L}.template.spec.containers": "Required value: must define at least one container",
            f"{W}.template.spec.containers": "Required value: must define at least one container",
            f"{W}.replicas": "must be >= 1",
        },
    ),
    "invalid replica fields": (
        _job(
            mpiReplicaSpecs={
                "Launcher": {
                    "replicas": 2,
                    "restartPolicy": "Always",
                    "template": {"spec": {"containers": [{}]}},
                },
                "Worker": {
                    "replicas": 0,
                    "restartPolicy": "Invalid",
                    "template": {"spec": {"containers": [{}]}},
                },
            }
        ),
        {
            f"{L}.restartPolicy": 'Unsupported value: "Always": supported values: "Never", '
            '"OnFailure"',
            f"{W}.restartPolicy": 'Unsupported value: "Invalid": supported values: "Never", '
            '"OnFailure"',
            f"{L}.replicas": "must be 1",
            f"{W}.replicas": "must be >= 1",
            f"{L}.template.spec.containers[0].name": "Required value",
            f"{L}.template.spec.containers[0].image": "Required value",
            f"{W}.template.spec.containers[0].name": "Required value",
            f"{W}.template.spec.containers[0].image": "Required value",
        },
    ),
    "spec is a list": (_job() | {"spec": [1, 2]}, {"spec": "must be an object, got list"}),
    "metadata is a string": (
        _job() | {"metadata": "foo"},
        {"metadata": 'must be an object, got string "foo"'},
    ),
    "replica specs is a string": (
        _job(mpiReplicaSpecs="all"),
        {"spec.mpiReplicaSpecs": 'must be an object, got string "all"'},
    ),
    "containers not a list": (
        _job(mpiReplicaSpecs={"Launcher": {"template": {"spec": {"containers": {"name": "c"}}}}}),
        {f"{L}.template.spec.containers": "must be a list, got object"},
    ),
    "boolean replicas": (
        _job(
            mpiReplicaSpecs={
                "Launcher": {
                    "replicas": True,
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            }
        ),
        {f"{L}.replicas": "must be an integer, got boolean true"},
    ),
    "float slots": (
        _job(slotsPerWorker=1.5),
        {"spec.slotsPerWorker": "must be an integer, got number 1.5"},
    ),
    "suspend string": (
        _job(runPolicy={"suspend": "true"}),
        {"spec.runPolicy.suspend": 'must be a boolean, got string "true"'},
    ),
    "condition without type": (
        _job()
        | {"status": {"conditions": [{"status": "True"}, {"type": "Running", "status": "Maybe"}]}},
        {
            "status.conditions[0].type": "Required value",
            "status.conditions[1].status": 'Unsupported value: "Maybe": supported values: "True", '
            '"False"',
        },
    ),
    "bad timestamp": (
        _job() | {"status": {"startTime": "yesterday"}},
        {
            "status.startTime": "must be an RFC 3339 date-time such as 2024-01-01T00:00:00Z, "
            'got string "yesterday"'
        },
    ),
    "no name but a bad generateName": (
        _job() | {"metadata": {"generateName": "Pi-"}},
        {"metadata.generateName": "Invalid value"},
    ),
}


@pytest.mark.parametrize(("obj", "expected"), INLINE.values(), ids=list(INLINE))
def test_inline_invalid_objects(obj: Any, expected: dict[str, str]) -> None:
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(copy.deepcopy(obj))
    got = {e.path: e.message for e in caught.value.errors}
    assert set(got) == set(expected), got
    for path, message in expected.items():
        assert got[path].startswith(message), (path, got[path])


def test_name_check_uses_the_highest_worker_index() -> None:
    # 54 characters: "-worker-9" makes 63 (the DNS-1035 maximum), "-worker-10" one too many.
    name = "a" * 54
    assert parse_and_validate(_job() | {"metadata": {"name": name}}).job.name == name
    ten = _job(mpiReplicaSpecs={"Launcher": _job()["spec"]["mpiReplicaSpecs"]["Launcher"]})
    ten["spec"]["mpiReplicaSpecs"]["Worker"] = {
        "replicas": 11,
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    ten["metadata"]["name"] = name
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(ten)
    assert [e.path for e in caught.value.errors] == ["metadata.name"]
    assert f'"{name}-worker-10"' in caught.value.errors[0].message


def test_unknown_fields_are_reported_with_the_closest_known_name() -> None:
    obj = _job(slotPerWorker=2, runPolicy={"cleanupPolicy": "All"})
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replica"] = 3
    obj["spec"]["mpiReplicaSpecs"]["worker"] = {}
    obj["status"] = {"phase": "Running"}
    obj["metadata"]["lables"] = {"team": "ml"}
    obj["spec"]["zzz"] = 1
    result = parse_and_validate(obj)
    assert sorted((u.path, u.suggestion) for u in result.unknown) == [
        ("metadata.lables", "labels"),
        ("spec.mpiReplicaSpecs.Worker.replica", "replicas"),
        ("spec.mpiReplicaSpecs.worker", "Worker"),
        ("spec.runPolicy.cleanupPolicy", "cleanPodPolicy"),
        ("spec.slotPerWorker", "slotsPerWorker"),
        ("spec.zzz", None),
        ("status.phase", None),
    ]
    assert result.warnings == []
    assert result.job.spec.slots_per_worker is None


def test_unknown_fields_of_the_last_applied_manifest_are_found() -> None:
    # The API server dropped the typo; kubectl apply's annotation still has it.
    applied = _job(slotPerWorker=2)
    stored = _job()
    stored["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(applied)}
    assert [u.message("dropped") for u in unknown_fields(stored)] == [
        'spec.slotPerWorker: unknown field, dropped; did you mean "slotsPerWorker"?'
    ]
    stored["metadata"]["annotations"] = {LAST_APPLIED: "{not json"}
    assert unknown_fields(stored) == []


def test_unknown_fields_inside_pod_templates_are_kept_silently() -> None:
    obj = _job()
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["futureField"] = {"x": 1}
    result = parse_and_validate(obj)
    assert result.warnings == []
    assert result.job.spec.mpi_replica_specs.worker is not None
    assert result.job.spec.mpi_replica_specs.worker.template["spec"]["futureField"] == {"x": 1}


def test_snake_case_names_are_not_accepted_from_manifests() -> None:
    # populate_by_name is for Python callers; the API server would prune these keys.
    result = normalize(_job(slots_per_worker=4))
    assert result.job.spec.slots_per_worker is None
    assert [(u.path, u.suggestion) for u in result.unknown] == [
        ("spec.slots_per_worker", "slotsPerWorker")
    ]


def test_validate_rechecks_jobs_built_without_validation() -> None:
    job = parse_and_validate(_job()).job
    worker = job.spec.mpi_replica_specs.worker
    assert worker is not None
    broken = job.model_copy(
        update={
            "spec": job.spec.model_copy(
                update={
                    "slots_per_worker": -2,
                    "mpi_replica_specs": job.spec.mpi_replica_specs.model_copy(
                        update={"worker": worker.model_copy(update={"replicas": 0})}
                    ),
                }
            )
        }
    )
    assert [str(e) for e in validate(broken)] == [
        "spec.slotsPerWorker: must be >= 0",
        f"{W}.replicas: must be >= 1",
    ]
    assert validate(job) == []


def test_normalize_returns_jobs_that_only_break_cross_field_rules() -> None:
    obj = _job()
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 0
    assert normalize(obj).job.spec.mpi_replica_specs.worker is not None
    assert [str(e) for e in validate(normalize(obj).job)] == [f"{W}.replicas: must be >= 1"]


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "mpiReplicaSpecs", "Worker", "replicas"), "spec.mpiReplicaSpecs.Worker.replicas"),
        (("status", "conditions", 0, "type"), "status.conditions[0].type"),
        (("spec", "minResources", "nvidia.com/gpu"), "spec.minResources[nvidia.com/gpu]"),
        ((), "<root>"),
    ],
    ids=["dotted", "index", "key-with-dots", "root"],
)
def test_format_path(loc: tuple[str | int, ...], path: str) -> None:
    assert format_path(loc) == path


def test_merge_errors_drops_errors_under_reported_paths() -> None:
    first = [FieldError("spec.mpiReplicaSpecs", "Required value")]
    later = [
        FieldError("spec.mpiReplicaSpecs.Launcher", "Required value"),
        FieldError("spec.mpiReplicaSpecsX", "other"),
        FieldError("metadata.name", "Required value"),
    ]
    assert [e.path for e in merge_errors(first, later)] == [
        "spec.mpiReplicaSpecs",
        "spec.mpiReplicaSpecsX",
        "metadata.name",
    ]
    assert is_under("a.b[0]", "a.b")
    assert is_under("a.b.c", "a.b")
    assert not is_under("a.bc", "a.b")


@pytest.mark.parametrize("replicas", [-1, 0])
def test_too_few_workers_is_one_error_naming_the_bound_the_crd_has(replicas: int) -> None:
    obj = _job()
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(obj)
    assert [str(e) for e in caught.value.errors] == [f"{W}.replicas: must be >= 1"]
