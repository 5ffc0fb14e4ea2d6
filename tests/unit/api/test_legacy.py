"""Legacy (v1, v1alpha2, v1alpha1) manifests map onto canonical v2beta1, with notes naming each
mapping."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpi_operator.api import InvalidMPIJob, parse_and_validate, to_canonical_dict

VALID = Path(__file__).resolve().parents[2] / "manifests" / "valid"


def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((VALID / name).read_text())
    assert isinstance(doc, dict)
    return doc


def _notes(obj: dict[str, Any], **kwargs: Any) -> list[str]:
    return [str(n) for n in parse_and_validate(obj, **kwargs).notes]


def test_v1_horovod_elastic_example() -> None:
    obj = _load("v1-horovod-elastic.yaml")
    result = parse_and_validate(obj)
    spec = to_canonical_dict(result.job)["spec"]
    assert "cleanPodPolicy" not in spec
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": False}
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert (
        spec["mpiReplicaSpecs"]["Launcher"]["template"]
        == obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    )
    assert [str(n) for n in result.notes] == [
        "apiVersion: kubeflow.org/v1 -> apiVersion: kubeflow.org/v2beta1 "
        "(deprecated version, served through the v2beta1 schema)",
        "spec.cleanPodPolicy: Running -> spec.runPolicy.cleanPodPolicy: Running",
    ]
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command: not set"
    )


def test_v1alpha2_intel_with_main_container() -> None:
    result = parse_and_validate(_load("v1alpha2-intel.yaml"))
    spec = to_canonical_dict(result.job)["spec"]
    assert spec["mpiImplementation"] == "Intel"
    assert spec["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 4, "suspend": False}
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    assert [c["name"] for c in launcher] == ["mpi", "log-shipper"]
    assert [str(n) for n in result.notes][1:] == [
        "spec.backoffLimit: 4 -> spec.runPolicy.backoffLimit: 4",
        "spec.mpiDistribution: IntelMPI -> spec.mpiImplementation: Intel",
        "spec.mainContainer: mpi -> spec.mpiReplicaSpecs.Launcher.template.spec.containers[0] "
        "(moved from index 1)",
        "spec.mainContainer: mpi -> spec.mpiReplicaSpecs.Worker.template.spec.containers[0] "
        "(already first)",
    ]
    assert result.warnings == []


def test_v1alpha1_gpus_split_into_workers() -> None:
    obj = _load("v1alpha1-gpus.yaml")
    original = copy.deepcopy(obj)
    result = parse_and_validate(obj, gpus_per_node=8)
    assert obj == original, "normalize must not mutate its input"
    spec = to_canonical_dict(result.job)["spec"]
    worker, launcher = spec["mpiReplicaSpecs"]["Worker"], spec["mpiReplicaSpecs"]["Launcher"]
    assert worker["replicas"] == 2
    worker_container = worker["template"]["spec"]["containers"][0]
    assert worker_container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert (worker_container["command"], worker_container["args"]) == (["/usr/sbin/sshd"], ["-De"])
    launcher_container = launcher["template"]["spec"]["containers"][0]
    assert "resources" not in launcher_container
    assert (
        launcher_container["command"]
        == original["spec"]["template"]["spec"]["containers"][0]["command"]
    )
    assert launcher["replicas"] == 1
    assert spec["slotsPerWorker"] == 8
    assert spec["runPolicy"]["backoffLimit"] == 2
    assert (
        "spec.gpus: 16 -> spec.mpiReplicaSpecs.Worker.replicas: 2 "
        "(8 nvidia.com/gpu per worker in containers[0] limits)" in [str(n) for n in result.notes]
    )


def _v1alpha1(template_limits: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "horovod:latest",
        "command": ["mpirun", "python", "t.py"],
    }
    if template_limits is not None:
        container["resources"] = {"limits": template_limits}
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "metadata": {"name": "legacy"},
        "spec": {"template": {"spec": {"containers": [container]}}} | spec,
    }


SPLITS: dict[str, tuple[dict[str, Any], int, tuple[int, str, int]]] = {
    "flag": (_v1alpha1(gpus=16), 8, (2, "nvidia.com/gpu", 8)),
    "gpusPerNode beats flag": (_v1alpha1(gpus=16, gpusPerNode=4), 8, (4, "nvidia.com/gpu", 4)),
    "flag default 1": (_v1alpha1(gpus=16), 1, (16, "nvidia.com/gpu", 1)),
    "fewer than a node": (_v1alpha1(gpus=4), 8, (1, "nvidia.com/gpu", 4)),
    "template limit beats gpusPerNode": (
        _v1alpha1({"nvidia.com/gpu": 8}, gpus=16, gpusPerNode=2),
        1,
        (2, "nvidia.com/gpu", 8),
    ),
    "cpu processing units": (
        _v1alpha1(processingUnits=8, processingUnitsPerNode=4, processingResourceType="cpu"),
        8,
        (2, "cpu", 4),
    ),
    "gpu processing units use the flag": (
        _v1alpha1(processingUnits=16),
        8,
        (2, "nvidia.com/gpu", 8),
    ),
    "plain replicas": (_v1alpha1(replicas=3), 8, (3, "", 0)),
}


@pytest.mark.parametrize(("obj", "flag", "want"), SPLITS.values(), ids=list(SPLITS))
def test_v1alpha1_processing_units(
    obj: dict[str, Any], flag: int, want: tuple[int, str, int]
) -> None:
    workers, resource, per_worker = want
    spec = to_canonical_dict(parse_and_validate(obj, gpus_per_node=flag).job)["spec"]
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == workers
    limits = worker["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
    if resource:
        assert limits[resource] == per_worker
        assert spec["slotsPerWorker"] == per_worker
    else:
        assert limits == {}
        assert "slotsPerWorker" not in spec


@pytest.mark.parametrize(
    ("obj", "errors"),
    [
        (
            _v1alpha1(gpus=12, gpusPerNode=8),
            ["spec.gpus: must be a multiple of the 8 nvidia.com/gpu per worker"],
        ),
        (
            _v1alpha1(gpus=8, processingUnits=8),
            ["spec.processingUnits: cannot be combined with spec.gpus"],
        ),
        (
            _v1alpha1(),
            ["spec.replicas: Required value: set spec.replicas, spec.gpus or spec.processingUnits"],
        ),
        (
            _v1alpha1(gpus="16"),
            ['spec.gpus: must be an integer, got string "16"', "spec.replicas: Required value"],
        ),
        (
            _v1alpha1(replicas=2) | {"spec": {"replicas": 2, "template": {"spec": {}}}},
            ["spec.template.spec.containers: Required value: must define at least one container"],
        ),
        (
            _v1alpha1(replicas=2, mpiReplicaSpecs={"Launcher": {}}),
            ["spec.template: cannot be combined with spec.mpiReplicaSpecs"],
        ),
    ],
    ids=[
        "not-a-multiple",
        "gpus-and-units",
        "no-count",
        "gpus-string",
        "template-without-containers",
        "mixed-shapes",
    ],
)
def test_v1alpha1_errors_use_legacy_paths(obj: dict[str, Any], errors: list[str]) -> None:
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(obj, gpus_per_node=8)
    got = [str(e) for e in caught.value.errors]
    for want in errors:
        assert any(g.startswith(want) for g in got), (want, got)
    assert all(not g.startswith("spec.mpiReplicaSpecs.Worker") for g in got), got


def _v1(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "i"}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "old"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [container | {"command": ["sshd"]}]}},
                },
            }
        }
        | spec,
    }


def test_run_policy_wins_over_legacy_top_level_fields() -> None:
    result = parse_and_validate(
        _v1(
            cleanPodPolicy="All",
            backoffLimit=3,
            runPolicy={"cleanPodPolicy": "Running", "backoffLimit": 3},
        )
    )
    assert result.job.spec.run_policy.clean_pod_policy == "Running"
    assert result.warnings == [
        "spec.cleanPodPolicy: 'All' is ignored: spec.runPolicy.cleanPodPolicy ('Running') takes "
        "precedence"
    ]
    assert result.job.spec.run_policy.backoff_limit == 3


def test_mpi_implementation_wins_over_mpi_distribution() -> None:
    result = parse_and_validate(_v1(mpiDistribution="MPICH", mpiImplementation="Intel"))
    assert result.job.spec.mpi_implementation == "Intel"
    assert result.warnings == [
        "spec.mpiDistribution: 'MPICH' is ignored: spec.mpiImplementation ('Intel') takes "
        "precedence"
    ]


@pytest.mark.parametrize(
    ("distribution", "implementation"),
    [
        ("OpenMPI", "OpenMPI"),
        ("open_mpi", "OpenMPI"),
        ("IntelMPI", "Intel"),
        ("intel_mpi", "Intel"),
        ("mpich", "MPICH"),
    ],
)
def test_mpi_distribution_values(distribution: str, implementation: str) -> None:
    assert (
        parse_and_validate(_v1(mpiDistribution=distribution)).job.spec.mpi_implementation
        == implementation
    )


def test_unknown_main_container_is_a_warning() -> None:
    result = parse_and_validate(_v1(mainContainer="trainer"))
    assert result.warnings == [
        "spec.mainContainer: no container named 'trainer' in the Launcher or Worker template; "
        "containers[0] is treated as the MPI container"
    ]


def test_launcher_on_master_adds_toleration_and_affinity() -> None:
    result = parse_and_validate(_v1(launcherOnMaster=True))
    pod = result.job.launcher.template["spec"]
    assert {t["key"] for t in pod["tolerations"]} == {
        "node-role.kubernetes.io/master",
        "node-role.kubernetes.io/control-plane",
    }
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 2


def test_legacy_fields_are_mapped_whatever_the_api_version() -> None:
    # The API server hands the operator every object as v2beta1 (conversion None): fields decide.
    obj = _v1(cleanPodPolicy="All", activeDeadlineSeconds=600) | {
        "apiVersion": "kubeflow.org/v2beta1"
    }
    result = parse_and_validate(obj)
    assert result.job.spec.run_policy.clean_pod_policy == "All"
    assert result.job.spec.run_policy.active_deadline_seconds == 600
    assert [str(n) for n in result.notes] == [
        "spec.cleanPodPolicy: All -> spec.runPolicy.cleanPodPolicy: All",
        "spec.activeDeadlineSeconds: 600 -> spec.runPolicy.activeDeadlineSeconds: 600",
    ]


def test_legacy_errors_are_reported_at_the_legacy_path() -> None:
    with pytest.raises(InvalidMPIJob) as caught:
        parse_and_validate(_v1(backoffLimit=-1, cleanPodPolicy="Never"))
    assert [str(e) for e in caught.value.errors] == [
        "spec.backoffLimit: must be >= 0",
        'spec.cleanPodPolicy: Unsupported value: "Never": supported values: "All", "Running", '
        '"None"',
    ]


def test_legacy_status_fields_are_dropped() -> None:
    result = parse_and_validate(
        _v1() | {"status": {"launcherStatus": "Active", "workerReplicas": 2}}
    )
    assert result.job.status is not None
    assert "spec" not in str(result.warnings)
    assert "status.launcherStatus -> status.replicaStatuses (dropped: status is rewritten)" in [
        str(n) for n in result.notes
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in VALID.glob("*.yaml")))
def test_normalized_legacy_output_is_canonical(name: str) -> None:
    first = to_canonical_dict(parse_and_validate(_load(name), gpus_per_node=8).job)
    again = parse_and_validate(first)
    assert to_canonical_dict(again.job) == first
    assert again.notes == []


@pytest.mark.parametrize(
    ("worker_fields", "says"),
    [
        ({}, "workers run `/usr/sbin/sshd -De` by default, so the image must provide sshd"),
        (
            {"args": ["-p", "2222"]},
            "workers run the image's entrypoint with these args and it must serve SSH",
        ),
        ({"command": ["/usr/sbin/sshd", "-De"]}, None),
    ],
    ids=["no-command-no-args", "args-only", "command"],
)
def test_v1_worker_command_warning_matches_what_the_worker_will_run(
    worker_fields: dict[str, Any], says: str | None
) -> None:
    obj = _v1()
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = [
        {"name": "c", "image": "i", **worker_fields}
    ]
    warnings = parse_and_validate(obj).warnings
    if says is None:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert warnings[0].startswith(
            "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command: not set"
        )
        assert says in warnings[0]
