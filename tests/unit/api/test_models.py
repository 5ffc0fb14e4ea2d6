"""The canonical models: defaults (mirroring upstream default_test), immutability, the CRD-facing
schema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mpi_operator.api import MPIJob, ServedMPIJob, normalize, to_canonical_dict
from mpi_operator.api import constants as c
from mpi_operator.api.defaults import slots_per_worker
from mpi_operator.api.quantities import pod_gpus


def _job(spec: dict[str, Any]) -> MPIJob:
    return normalize(
        {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": {"name": "test"}, "spec": spec}
    ).job


def _spec_after_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = to_canonical_dict(_job(spec))["spec"]
    return result


# Differences from upstream's SetDefaults_MPIJob, both on purpose
# (docs/architecture.md#decisions-and-why):
# - launcherCreationPolicy defaults to WaitForWorkersReady (upstream: AtStartup);
# - slotsPerWorker stays unset in the object (upstream writes 1); its effective value,
#   defaults.slots_per_worker(), is 1, or the GPUs each worker requests.
BASE_DEFAULTS: dict[str, Any] = {
    "runLauncherAsWorker": False,
    "runPolicy": {"cleanPodPolicy": "None", "suspend": False},
    "sshAuthMountPath": "/root/.ssh",
    "mpiImplementation": "OpenMPI",
    # Upstream defaults to AtStartup; ours waits for Ready workers, so mpirun never meets a mute
    # one.
    "launcherCreationPolicy": "WaitForWorkersReady",
}
UPSTREAM_SLOTS = 1
LAUNCHER_DEFAULTS = {"replicas": 1, "restartPolicy": "OnFailure", "template": {}}
WORKER_DEFAULTS = {"replicas": 0, "restartPolicy": "Never", "template": {}}
OVERRIDDEN = {
    "slotsPerWorker": 10,
    "runLauncherAsWorker": True,
    "runPolicy": {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": 2,
        "activeDeadlineSeconds": 3,
        "backoffLimit": 4,
        "suspend": True,
    },
    "sshAuthMountPath": "/home/mpiuser/.ssh",
    "launcherCreationPolicy": "AtStartup",
}

# upstream pkg/apis/kubeflow/v2beta1/default_test.go, case by case (a Launcher is always given here:
# our model requires it where upstream's map may be empty).
DEFAULT_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {
    "base defaults": (
        {"mpiReplicaSpecs": {"Launcher": {}}},
        BASE_DEFAULTS | {"mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS}},
        UPSTREAM_SLOTS,
    ),
    "base defaults overridden (intel)": (
        OVERRIDDEN | {"mpiImplementation": "Intel", "mpiReplicaSpecs": {"Launcher": {}}},
        OVERRIDDEN
        | {"mpiImplementation": "Intel", "mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS}},
        10,
    ),
    "base defaults overridden (mpich)": (
        OVERRIDDEN | {"mpiImplementation": "MPICH", "mpiReplicaSpecs": {"Launcher": {}}},
        OVERRIDDEN
        | {"mpiImplementation": "MPICH", "mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS}},
        10,
    ),
    "launcher defaults": (
        {"mpiReplicaSpecs": {"Launcher": {}}},
        BASE_DEFAULTS | {"mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS}},
        UPSTREAM_SLOTS,
    ),
    "worker defaults": (
        {"mpiReplicaSpecs": {"Launcher": {}, "Worker": {}}},
        BASE_DEFAULTS
        | {"mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS, "Worker": WORKER_DEFAULTS}},
        UPSTREAM_SLOTS,
    ),
    # ours: slots follow the GPUs each worker requests when slotsPerWorker is unset
    "slots from worker GPUs": (
        {
            "mpiReplicaSpecs": {
                "Launcher": {},
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
                    },
                },
            }
        },
        BASE_DEFAULTS
        | {
            "mpiReplicaSpecs": {
                "Launcher": LAUNCHER_DEFAULTS,
                "Worker": WORKER_DEFAULTS
                | {
                    "replicas": 2,
                    "template": {
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
                    },
                },
            },
        },
        4,
    ),
    "elastic policy defaults": (
        {"mpiReplicaSpecs": {"Launcher": {}}, "elasticPolicy": {"maxReplicas": 4}},
        BASE_DEFAULTS
        | {
            "mpiReplicaSpecs": {"Launcher": LAUNCHER_DEFAULTS},
            "elasticPolicy": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "scaleInGracePeriodSeconds": 30,
                "settleSeconds": 5,
                "maxReplacements": 10,
                "belowMinTimeoutSeconds": 300,
            },
        },
        UPSTREAM_SLOTS,
    ),
}


@pytest.mark.parametrize(("spec", "want", "slots"), DEFAULT_CASES.values(), ids=list(DEFAULT_CASES))
def test_set_defaults(spec: dict[str, Any], want: dict[str, Any], slots: int) -> None:
    assert _spec_after_defaults(spec) == want
    assert slots_per_worker(_job(spec).spec) == slots


def test_wait_for_workers_ready_is_our_only_default_that_differs_from_upstream() -> None:
    assert c.DEFAULT_LAUNCHER_CREATION_POLICY == "WaitForWorkersReady"
    assert _spec_after_defaults({"mpiReplicaSpecs": {"Launcher": {}}})[
        "launcherCreationPolicy"
    ] == ("WaitForWorkersReady")
    explicit = {"launcherCreationPolicy": "AtStartup", "mpiReplicaSpecs": {"Launcher": {}}}
    assert _spec_after_defaults(explicit)["launcherCreationPolicy"] == "AtStartup"


@pytest.mark.parametrize(
    ("resources", "gpus"),
    [
        ({"limits": {"nvidia.com/gpu": 8}}, 8),
        ({"requests": {"amd.com/gpu": "2"}}, 2),
        ({"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}, 1),
        ({"limits": {"cpu": "4", "memory": "8Gi"}}, 0),
        # A device plugin hands out whole devices only, so a fraction counts as the next whole GPU.
        ({"limits": {"nvidia.com/gpu": "500m"}}, 1),
        ("junk", 0),
    ],
    ids=["nvidia-limit", "amd-request", "limit-and-request", "no-gpu", "fractional", "junk"],
)
def test_pod_gpus(resources: Any, gpus: int) -> None:
    template = {
        "spec": {"containers": [{"name": "a", "resources": resources}, {"name": "sidecar"}]}
    }
    assert pod_gpus(template) == gpus


def test_explicit_slots_win_over_gpus_even_zero() -> None:
    gpus = {
        "template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    }
    job = _job(
        {"slotsPerWorker": 0, "mpiReplicaSpecs": {"Launcher": {}, "Worker": gpus | {"replicas": 1}}}
    )
    assert job.spec.slots_per_worker == 0
    assert slots_per_worker(job.spec) == 0
    unset = _job({"mpiReplicaSpecs": {"Launcher": {}, "Worker": gpus | {"replicas": 1}}})
    assert unset.spec.slots_per_worker is None
    assert slots_per_worker(unset.spec) == 8


def test_models_are_frozen() -> None:
    job = normalize(
        {"apiVersion": c.API_VERSION, "kind": c.KIND, "spec": {"mpiReplicaSpecs": {"Launcher": {}}}}
    ).job
    with pytest.raises(ValidationError):
        job.spec.slots_per_worker = 3  # type: ignore[misc]


def test_python_callers_may_use_field_names() -> None:
    job = MPIJob.model_validate(
        {"spec": {"mpi_replica_specs": {"Launcher": {}}, "slots_per_worker": 2}}
    )
    assert job.spec.slots_per_worker == 2
    assert job.launcher.replicas == 1
    assert job.worker is None


# ---- the JSON schema the CRD is generated from
# ----------------------------------------------------

SCHEMA = MPIJob.model_json_schema(by_alias=True)
SERVED_SCHEMA = ServedMPIJob.model_json_schema(by_alias=True)
# Everything a structural CRD schema may hold, plus what pydantic adds ($defs/$ref to inline,
# titles).
ALLOWED_KEYWORDS = {
    "$defs", "$ref", "type", "properties", "required", "description", "title", "default", "enum",
    "items", "minimum", "maximum", "minLength", "format", "pattern", "additionalProperties",
    "anyOf", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}  # fmt: skip


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    found += _walk(sub, f"{path}/{key}/{name}")
            elif key in ("items", "additionalProperties") or key == "anyOf":
                for i, sub in enumerate(value if isinstance(value, list) else [value]):
                    found += _walk(sub, f"{path}/{key}/{i}")
    return found


@pytest.mark.parametrize("schema", [SCHEMA, SERVED_SCHEMA], ids=["canonical", "served"])
def test_every_property_has_a_description(schema: dict[str, Any]) -> None:
    undocumented = [
        f"{path}/{name}"
        for path, node in _walk(schema)
        for name, prop in node.get("properties", {}).items()
        if len(prop.get("description", "")) < 5
    ]
    assert undocumented == []


@pytest.mark.parametrize("schema", [SCHEMA, SERVED_SCHEMA], ids=["canonical", "served"])
def test_schema_uses_only_structural_keywords(schema: dict[str, Any]) -> None:
    for path, node in _walk(schema):
        if path.endswith(("/properties", "/$defs")):
            continue
        assert set(node) <= ALLOWED_KEYWORDS, (path, set(node) - ALLOWED_KEYWORDS)
        assert node.get("type") != "null", path
        assert node.get("default", 0) is not None, path
        if "anyOf" in node:  # only resource quantities
            assert node["x-kubernetes-int-or-string"] is True, path
        assert node.get("additionalProperties") is not True, path


def test_pod_templates_are_embedded_free_form_objects() -> None:
    defs = SCHEMA["$defs"]
    for name in ("LauncherReplicaSpec", "WorkerReplicaSpec"):
        template = defs[name]["properties"]["template"]
        assert template["type"] == "object"
        assert template["x-kubernetes-preserve-unknown-fields"] is True
        assert template["x-kubernetes-embedded-resource"] is True


def test_schema_carries_enums_bounds_and_defaults() -> None:
    defs = SCHEMA["$defs"]
    spec = defs["MPIJobSpec"]["properties"]
    assert spec["launcherCreationPolicy"]["enum"] == ["AtStartup", "WaitForWorkersReady"]
    assert spec["launcherCreationPolicy"]["default"] == "WaitForWorkersReady"
    assert spec["mpiImplementation"]["enum"] == ["OpenMPI", "Intel", "MPICH"]
    assert spec["sshAuthMountPath"]["default"] == "/root/.ssh"
    assert (spec["slotsPerWorker"]["type"], spec["slotsPerWorker"]["minimum"]) == ("integer", 0)
    assert "default" not in spec["slotsPerWorker"]  # so the operator can derive it from GPUs
    assert defs["MPIJobSpec"]["required"] == ["mpiReplicaSpecs"]
    assert defs["MPIReplicaSpecs"]["required"] == ["Launcher"]
    run_policy = defs["RunPolicy"]["properties"]
    assert run_policy["cleanPodPolicy"]["enum"] == ["All", "Running", "None"]
    assert run_policy["managedBy"]["enum"] == [c.CONTROLLER_NAME, c.MULTIKUEUE_CONTROLLER_NAME]
    launcher_replicas = defs["LauncherReplicaSpec"]["properties"]["replicas"]
    assert (
        launcher_replicas["minimum"],
        launcher_replicas["maximum"],
        launcher_replicas["default"],
    ) == (
        1,
        1,
        1,
    )
    assert defs["WorkerReplicaSpec"]["properties"]["replicas"]["minimum"] == 1
    elastic = defs["ElasticPolicy"]
    assert elastic["required"] == ["maxReplicas"]
    assert {k: v.get("minimum") for k, v in elastic["properties"].items()} == {
        "minReplicas": 1,
        "maxReplicas": 1,
        "scaleInGracePeriodSeconds": 0,
        "settleSeconds": 0,
        "maxReplacements": 0,
        "belowMinTimeoutSeconds": 0,
    }
    conditions = defs["MPIJobStatus"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_served_schema_is_a_superset_for_legacy_versions() -> None:
    spec = SERVED_SCHEMA["$defs"]["ServedMPIJobSpec"]
    assert "required" not in spec  # v1alpha1 manifests have no mpiReplicaSpecs
    legacy = {"gpus", "gpusPerNode", "processingUnits", "processingUnitsPerNode",
              "processingResourceType", "replicas", "template", "launcherOnMaster", "backoffLimit",
              "activeDeadlineSeconds", "cleanPodPolicy", "mainContainer",
              "mpiDistribution"}  # fmt: skip
    canonical = set(SCHEMA["$defs"]["MPIJobSpec"]["properties"])
    assert set(spec["properties"]) == legacy | canonical
    assert all(spec["properties"][name]["description"].startswith("Deprecated") for name in legacy)
