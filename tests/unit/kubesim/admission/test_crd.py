"""Custom resources against a structural schema: validation messages, pruning, defaulting."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.admission import AdmissionError, AdmissionResult, admit

REPLICA_SPEC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0},
        "restartPolicy": {
            "type": "string",
            "enum": ["Always", "OnFailure", "Never", "ExitCode"],
            "default": "Never",
        },
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["mpiReplicaSpecs"],
            "properties": {
                "slotsPerWorker": {
                    "type": "integer",
                    "format": "int32",
                    "default": 1,
                    "minimum": 1,
                },
                "sshAuthMountPath": {"type": "string", "default": "/root/.ssh", "pattern": "^/"},
                "mpiImplementation": {
                    "type": "string",
                    "enum": ["OpenMPI", "Intel", "MPICH"],
                    "default": "OpenMPI",
                },
                "runPolicy": {
                    "type": "object",
                    "properties": {
                        "cleanPodPolicy": {
                            "type": "string",
                            "enum": ["None", "Running", "All"],
                            "default": "None",
                        },
                        "ttlSecondsAfterFinished": {"type": "integer", "nullable": True},
                        "backoffLimit": {"type": "integer", "default": 6},
                        "schedulingPolicy": {
                            "type": "object",
                            "properties": {"queue": {"type": "string", "maxLength": 8}},
                        },
                    },
                },
                "elasticPolicy": {
                    "type": "object",
                    "properties": {
                        "minReplicas": {"type": "integer", "minimum": 1},
                        "maxReplicas": {
                            "type": "integer",
                            "maximum": 1024,
                            "exclusiveMaximum": True,
                        },
                        "scaleInGracePeriod": {"x-kubernetes-int-or-string": True},
                        "ratio": {"type": "number"},
                    },
                },
                "mpiReplicaSpecs": {
                    "type": "object",
                    "additionalProperties": REPLICA_SPEC,
                    "minProperties": 1,
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "set",
                    "maxItems": 3,
                },
                "hosts": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "slots": {"type": "integer"},
                        },
                    },
                },
                "podTemplate": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                },
                "startedAt": {"type": "string", "format": "date-time"},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def mpijob() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "team-a", "labels": {"app": "pi"}, "uid": "u-1"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "l", "image": "x", "anything": 1}]}
                    },
                },
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": {}}},
            },
        },
    }


def _admit(
    obj: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    field_validation: Any = "Warn",
    schema: dict[str, Any] | None = None,
) -> AdmissionResult:
    before = copy.deepcopy(obj)
    result = admit(
        operation="UPDATE" if old is not None else "CREATE",
        api_version="kubeflow.org/v2beta1",
        kind="MPIJob",
        obj=obj,
        old=old,
        schema=schema or SCHEMA,
        field_validation=field_validation,
    )
    assert obj == before
    return result


def _refused(obj: dict[str, Any], **kwargs: Any) -> AdmissionError:
    with pytest.raises(AdmissionError) as err:
        _admit(obj, **kwargs)
    return err.value


def test_defaults_are_applied_top_down_and_only_under_existing_parents() -> None:
    job = mpijob()
    job["spec"]["runPolicy"] = {}
    spec = _admit(job).obj["spec"]
    assert spec["slotsPerWorker"] == 1
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    assert spec["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 6}
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never", (
        "defaults inside map values"
    )
    assert spec["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure", "explicit values win"
    assert "elasticPolicy" not in spec, "no parent, no nested defaults"


def test_metadata_api_version_kind_and_free_form_fields_are_kept() -> None:
    obj = _admit(mpijob()).obj
    assert obj["apiVersion"] == "kubeflow.org/v2beta1"
    assert obj["kind"] == "MPIJob"
    assert obj["metadata"] == mpijob()["metadata"]
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    assert launcher["spec"]["containers"][0]["anything"] == 1


def test_unknown_fields_are_pruned_with_warnings() -> None:
    job = mpijob()
    job["spec"]["slotsPerWorkr"] = 2
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replica"] = 3
    job["metadata"]["labelz"] = {"a": "b"}
    job["top"] = 1
    result = _admit(job)
    assert result.warnings == [
        'unknown field "metadata.labelz"',
        'unknown field "spec.mpiReplicaSpecs.Worker.replica"',
        'unknown field "spec.slotsPerWorkr"',
        'unknown field "top"',
    ]
    assert "slotsPerWorkr" not in result.obj["spec"]
    assert "labelz" not in result.obj["metadata"]
    assert "top" not in result.obj
    assert _admit(job, field_validation="Ignore").warnings == []


def test_unknown_fields_strict_is_a_bad_request() -> None:
    job = mpijob()
    job["spec"]["slotsPerWorkr"] = 2
    err = _refused(job, field_validation="Strict")
    assert (err.code, err.reason) == (400, "BadRequest")
    assert (
        err.message == 'MPIJob in version "v2beta1" cannot be handled as a MPIJob: '
        'strict decoding error: unknown field "spec.slotsPerWorkr"'
    )


def test_embedded_resources_keep_type_meta() -> None:
    job = mpijob()
    job["spec"]["podTemplate"] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "t"},
        "spec": {"x": 1},
        "junk": 1,
    }
    result = _admit(job)
    assert result.obj["spec"]["podTemplate"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "t"},
        "spec": {"x": 1},
    }
    assert result.warnings == ['unknown field "spec.podTemplate.junk"']


def _with(path: str, value: Any) -> dict[str, Any]:
    job = mpijob()
    cur: Any = job
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    cur[keys[-1]] = value
    return job


INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "type",
        _with("spec.slotsPerWorker", "two"),
        'MPIJob.kubeflow.org "pi" is invalid: spec.slotsPerWorker: Invalid value: "string": '
        'spec.slotsPerWorker in body must be of type integer: "string"',
    ),
    (
        "required",
        {**mpijob(), "spec": {}},
        'MPIJob.kubeflow.org "pi" is invalid: spec.mpiReplicaSpecs: Required value',
    ),
    (
        "enum",
        _with("spec.runPolicy.cleanPodPolicy", "Some"),
        'spec.runPolicy.cleanPodPolicy: Unsupported value: "Some": '
        'supported values: "None", "Running", "All"',
    ),
    (
        "minimum-in-map-value",
        _with("spec.mpiReplicaSpecs.Worker.replicas", -1),
        "spec.mpiReplicaSpecs.Worker.replicas: Invalid value: -1: "
        "spec.mpiReplicaSpecs.Worker.replicas "
        "in body should be greater than or equal to 0",
    ),
    (
        "exclusive-maximum",
        _with("spec.elasticPolicy.maxReplicas", 1024),
        "spec.elasticPolicy.maxReplicas: Invalid value: 1024: spec.elasticPolicy.maxReplicas "
        "in body should be less than 1024",
    ),
    (
        "pattern",
        _with("spec.sshAuthMountPath", "root"),
        'spec.sshAuthMountPath: Invalid value: "root": spec.sshAuthMountPath in body should '
        "match '^/'",
    ),
    (
        "max-length",
        _with("spec.runPolicy.schedulingPolicy.queue", "x" * 9),
        "spec.runPolicy.schedulingPolicy.queue: Too long: may not be more than 8 bytes",
    ),
    (
        "max-items",
        _with("spec.tags", ["a", "b", "c", "d"]),
        "spec.tags: Too many: 4: must have at most 3 items",
    ),
    ("set-duplicates", _with("spec.tags", ["a", "a"]), 'spec.tags[1]: Duplicate value: "a"'),
    (
        "map-duplicates",
        _with("spec.hosts", [{"name": "w0"}, {"name": "w0", "slots": 2}]),
        'spec.hosts[1]: Duplicate value: {"name":"w0"}',
    ),
    ("item-required", _with("spec.hosts", [{"slots": 1}]), "spec.hosts[0].name: Required value"),
    (
        "min-length",
        _with("spec.hosts", [{"name": ""}]),
        'spec.hosts[0].name: Invalid value: "": spec.hosts[0].name in body should be at least 1 '
        "chars long",
    ),
    (
        "int-or-string",
        _with("spec.elasticPolicy.scaleInGracePeriod", True),
        'spec.elasticPolicy.scaleInGracePeriod: Invalid value: "boolean": '
        'spec.elasticPolicy.scaleInGracePeriod in body must be of type integer,string: "boolean"',
    ),
    (
        "date-time",
        _with("spec.startedAt", "yesterday"),
        'spec.startedAt: Invalid value: "yesterday": spec.startedAt '
        'in body must be of type date-time: "yesterday"',
    ),
    (
        "min-properties",
        _with("spec.mpiReplicaSpecs", {}),
        'spec.mpiReplicaSpecs: Invalid value: "object": spec.mpiReplicaSpecs '
        "in body should have at least 1 properties",
    ),
    (
        "array-item-null",
        _with("spec.tags", ["a", None]),
        'spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of type string: "null"',
    ),
    (
        "name",
        {**mpijob(), "metadata": {"name": "Pi"}},
        'metadata.name: Invalid value: "Pi": a lowercase RFC 1123 subdomain',
    ),
]


@pytest.mark.parametrize(("obj", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_custom_resources(obj: dict[str, Any], message: str) -> None:
    err = _refused(obj)
    assert (err.code, err.reason) == (422, "Invalid")
    assert message in err.message, err.message


def test_several_errors_are_bracketed() -> None:
    job = _with("spec.slotsPerWorker", 0)
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "x"}
    err = _refused(job)
    assert err.message.startswith(
        'MPIJob.kubeflow.org "pi" is invalid: [spec.slotsPerWorker: Invalid value: 0'
    )
    assert len(err.causes) == 2


VALID: list[tuple[str, dict[str, Any], Any]] = [
    (
        "nullable-null-kept",
        _with("spec.runPolicy.ttlSecondsAfterFinished", None),
        lambda s: s["runPolicy"]["ttlSecondsAfterFinished"] is None,
    ),
    (
        "non-nullable-null-pruned",
        _with("spec.elasticPolicy.minReplicas", None),
        lambda s: s["elasticPolicy"] == {},
    ),
    (
        "null-with-default-defaults",
        _with("spec.slotsPerWorker", None),
        lambda s: s["slotsPerWorker"] == 1,
    ),
    (
        "integral-float-is-an-integer",
        _with("spec.slotsPerWorker", 4.0),
        lambda s: s["slotsPerWorker"] == 4 and isinstance(s["slotsPerWorker"], int),
    ),
    (
        "number-takes-ints",
        _with("spec.elasticPolicy.ratio", 2),
        lambda s: s["elasticPolicy"]["ratio"] == 2,
    ),
    (
        "int-or-string-int",
        _with("spec.elasticPolicy.scaleInGracePeriod", 30),
        lambda s: s["elasticPolicy"]["scaleInGracePeriod"] == 30,
    ),
    (
        "int-or-string-string",
        _with("spec.elasticPolicy.scaleInGracePeriod", "30s"),
        lambda s: s["elasticPolicy"]["scaleInGracePeriod"] == "30s",
    ),
    (
        "date-time",
        _with("spec.startedAt", "2026-01-02T03:04:05Z"),
        lambda s: s["startedAt"].endswith("Z"),
    ),
    ("status-free-form", {**mpijob(), "status": {"anything": [1, {"x": None}]}}, lambda s: True),
]


@pytest.mark.parametrize(("obj", "check"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_custom_resources(obj: dict[str, Any], check: Any) -> None:
    result = _admit(obj)
    assert check(result.obj["spec"])
    assert result.warnings == []


_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["OpenMPI", "None", "x", "/a"])
)
_keys = st.sampled_from(
    [
        "slotsPerWorker",
        "sshAuthMountPath",
        "mpiImplementation",
        "runPolicy",
        "elasticPolicy",
        "tags",
        "extra",
        "cleanPodPolicy",
        "minReplicas",
        "Worker",
        "replicas",
    ]
)
_value = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    spec=st.dictionaries(_keys, _value, max_size=6),
    replicas=st.dictionaries(
        st.sampled_from(["Launcher", "Worker"]),
        st.dictionaries(_keys, _value, max_size=3),
        min_size=1,
    ),
)
def test_admission_is_idempotent(spec: dict[str, Any], replicas: dict[str, Any]) -> None:
    """Whatever is admitted, admitting the result again changes nothing and warns about nothing."""
    job = mpijob()
    job["spec"] = {**spec, "mpiReplicaSpecs": replicas}
    try:
        first = _admit(job)
    except AdmissionError:
        return
    second = _admit(first.obj)
    assert second.obj == first.obj
    assert second.warnings == []


def test_update_keeps_validating() -> None:
    old = _admit(mpijob()).obj
    new = copy.deepcopy(old)
    new["spec"]["slotsPerWorker"] = "x"
    assert "must be of type integer" in _refused(new, old=old).message


def test_schema_compilation_is_cached_per_schema_object() -> None:
    from kubesim.admission.crd import crd_node

    schema = copy.deepcopy(SCHEMA)
    assert crd_node(schema) is crd_node(schema)
    assert crd_node(copy.deepcopy(schema)) is not crd_node(schema)
