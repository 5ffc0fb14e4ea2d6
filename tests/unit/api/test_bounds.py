"""The worker ceiling: every way to a worker count (Worker.replicas, elasticPolicy, horovodrun's
flags, the v1alpha1 `replicas` / `gpus` / `processingUnits` split, the gang size) is held to the
limit in force, the API's ceiling or the operator's lower `--max-workers-per-job`, and the error
names the field and the limit. Before the ceiling, `Worker.replicas: 2147483647` validated and froze
the operator."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.api import InvalidMPIJob, crd, normalize, parse_and_validate
from mpi_operator.api import constants as c
from mpi_operator.api.validation import worker_limit

CEILING = c.MAX_WORKER_REPLICAS
INT32_MAX = 2**31 - 1
W = "spec.mpiReplicaSpecs.Worker"
L = "spec.mpiReplicaSpecs.Launcher"
THE_CEILING = f"must be no more than {CEILING} workers, the most an MPIJob may have"
DISCOVERY = "/etc/mpi/discover_hosts.sh"


def job(workers: int = 2, launcher_command: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    launcher: dict[str, Any] = {"name": "launcher", "image": "mpi:1"}
    if launcher_command is not None:
        launcher["command"] = launcher_command
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [launcher]}}},
                "Worker": {
                    "replicas": workers,
                    "template": {"spec": {"containers": [{"name": "w", "image": "mpi:1"}]}},
                },
            },
            **copy.deepcopy(spec),
        },
    }
    return body


def v1alpha1(gpu_limit: int | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "tf", "image": "tf:1"}
    if gpu_limit is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpu_limit}}
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "metadata": {"name": "tf"},
        "spec": {"template": {"spec": {"containers": [container]}}, **spec},
    }


def horovodrun(*flags: str) -> list[str]:
    return ["horovodrun", *flags, "--host-discovery-script", DISCOVERY, "python", "train.py"]


def errors_of(obj: dict[str, Any], **options: Any) -> dict[str, str]:
    try:
        parse_and_validate(obj, **options)
    except InvalidMPIJob as exc:
        return {e.path: e.message for e in exc.errors}
    return {}


# name -> (manifest, options, {path: the message's words}); an empty dict means valid.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, str]]] = {
    "replicas 2^31-1": (
        job(INT32_MAX),
        {},
        {f"{W}.replicas": f"Invalid value: {INT32_MAX}: {THE_CEILING}"},
    ),
    "replicas at the ceiling": (job(CEILING), {}, {}),
    "replicas one over the ceiling": (
        job(CEILING + 1),
        {},
        {f"{W}.replicas": f"Invalid value: {CEILING + 1}: {THE_CEILING}"},
    ),
    "operator limit: at it": (job(100), {"max_workers": 100}, {}),
    "operator limit: one over": (
        job(101),
        {"max_workers": 100},
        {
            f"{W}.replicas": "Invalid value: 101: must be no more than 100 workers, the most this "
            "operator "
            "allows per MPIJob (--max-workers-per-job)"
        },
    ),
    "elastic bounds over the ceiling": (
        job(2, elasticPolicy={"minReplicas": CEILING + 1, "maxReplicas": INT32_MAX}),
        {},
        {
            "spec.elasticPolicy.minReplicas": f"Invalid value: {CEILING + 1}: {THE_CEILING}",
            "spec.elasticPolicy.maxReplicas": f"Invalid value: {INT32_MAX}: {THE_CEILING}",
            # The bounds rule of old reports the replicas below minReplicas as it always did.
            f"{W}.replicas": "must be between",
        },
    ),
    "elastic bounds at the ceiling": (job(2, elasticPolicy={"maxReplicas": CEILING}), {}, {}),
    "horovodrun --min-np over the ceiling": (
        job(2, launcher_command=horovodrun("--min-np", "9000")),
        {},
        {
            f"{L}.template.spec.containers[0]": 'Invalid value: "--min-np 9000": 9000 workers of 1 '
            "slot: " + THE_CEILING
        },
    ),
    "horovodrun -np over the ceiling, 4 slots": (
        job(2, launcher_command=horovodrun("-np", "12000"), slotsPerWorker=4),
        {},
        {
            f"{L}.template.spec.containers[0]": 'Invalid value: "-np 12000": 3000 workers of 4 '
            "slots: " + THE_CEILING
        },
    ),
    "horovodrun --max-np over the ceiling": (
        job(2, launcher_command=horovodrun("--min-np", "1", "--max-np", str(CEILING + 1))),
        {},
        {
            f"{L}.template.spec.containers[0]": f'"--max-np {CEILING + 1}": '
            f"{CEILING + 1} workers of 1 slot"
        },
    ),
    "horovodrun at the ceiling": (
        job(2, launcher_command=horovodrun("--min-np", "1", "--max-np", str(CEILING))),
        {},
        {},
    ),
    "gang size over the ceiling": (
        job(2, runPolicy={"schedulingPolicy": {"minAvailable": CEILING + 2}}),
        {},
        {
            "spec.runPolicy.schedulingPolicy.minAvailable": f"Invalid value: {CEILING + 2}: must "
            f"be no more than {CEILING + 1} pods ({CEILING} workers and the launcher), the most an "
            "MPIJob may have"
        },
    ),
    "gang size at the ceiling": (
        job(2, runPolicy={"schedulingPolicy": {"minAvailable": CEILING + 1}}),
        {},
        {},
    ),
    "v1alpha1 gpus 2^31-1": (
        v1alpha1(gpus=INT32_MAX),
        {},
        {
            "spec.gpus": f"Invalid value: {INT32_MAX}: {INT32_MAX} workers of 1 nvidia.com/gpu: "
            f"{THE_CEILING}"
        },
    ),
    "v1alpha1 gpus at the ceiling, --gpus-per-node 8": (
        v1alpha1(gpus=8 * CEILING),
        {"gpus_per_node": 8},
        {},
    ),
    "v1alpha1 gpus over the ceiling, gpusPerNode 8": (
        v1alpha1(gpus=8 * (CEILING + 1), gpusPerNode=8),
        {},
        {
            "spec.gpus": f"Invalid value: {8 * (CEILING + 1)}: {CEILING + 1} workers of 8 "
            f"nvidia.com/gpu: {THE_CEILING}"
        },
    ),
    "v1alpha1 gpus over the ceiling, the template's limit": (
        v1alpha1(gpu_limit=4, gpus=4 * (CEILING + 1)),
        {"gpus_per_node": 8},
        {"spec.gpus": f"{CEILING + 1} workers of 4 nvidia.com/gpu"},
    ),
    "v1alpha1 gpus over the operator's limit": (
        v1alpha1(gpus=11),
        {"max_workers": 10},
        {
            "spec.gpus": "Invalid value: 11: 11 workers of 1 nvidia.com/gpu: must be no more than "
            "10 workers"
        },
    ),
    "v1alpha1 processingUnits 2^31-1": (
        v1alpha1(processingUnits=INT32_MAX, processingResourceType="cpu"),
        {},
        {"spec.processingUnits": f"{INT32_MAX} workers of 1 cpu: {THE_CEILING}"},
    ),
    "v1alpha1 replicas 2^31-1": (
        v1alpha1(replicas=INT32_MAX),
        {},
        {"spec.replicas": f"Invalid value: {INT32_MAX}: {THE_CEILING}"},
    ),
    # Copied to Go int32/int64 fields of the launcher Job and the PodGroup, which the API would
    # refuse on every retry: refused up front, naming the field and the limit.
    "runPolicy int32 fields at their limit": (
        job(2, runPolicy={"backoffLimit": INT32_MAX, "ttlSecondsAfterFinished": INT32_MAX}),
        {},
        {},
    ),
    "runPolicy int32 fields over their limit": (
        job(
            2,
            runPolicy={
                "backoffLimit": INT32_MAX + 1,
                "ttlSecondsAfterFinished": INT32_MAX + 1,
                "schedulingPolicy": {"scheduleTimeoutSeconds": INT32_MAX + 1},
            },
        ),
        {},
        {
            "spec.runPolicy.backoffLimit": f"must be <= {INT32_MAX}",
            "spec.runPolicy.ttlSecondsAfterFinished": f"must be <= {INT32_MAX}",
            "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds": f"must be <= {INT32_MAX}",
        },
    ),
    "runPolicy.activeDeadlineSeconds over int64": (
        job(2, runPolicy={"activeDeadlineSeconds": 2**63}),
        {},
        {"spec.runPolicy.activeDeadlineSeconds": f"must be <= {2**63 - 1}"},
    ),
    "v1alpha1 backoffLimit over int32": (
        v1alpha1(replicas=1, backoffLimit=INT32_MAX + 1),
        {},
        {"spec.backoffLimit": f"must be <= {INT32_MAX}"},
    ),
}


LONG_DOMAIN = ".".join(
    ["d" * 60] * 4
)  # 243 characters: a valid DNS name, too long to end host names


def named(name: str, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] = {"name": name, "namespace": namespace}
    return obj


# Host names are `<worker>.<job>.<namespace>.svc[.<domain>]`: a DNS name of at most 253 characters,
# or the hostfile cannot list them and every sync would fail building it.
CASES |= {
    "host names within 253 with the cluster domain": (
        named("pi", "default", job(2)),
        {"cluster_domain": "corp.example"},
        {},
    ),
    "host names over 253 with a long cluster domain": (
        named("pi", "default", job(2)),
        {"cluster_domain": LONG_DOMAIN},
        {
            "metadata.name": 'Invalid value: "pi": the workers\' host names '
            "(<worker>.pi.<namespace>.svc."
            f"{LONG_DOMAIN}) would be up to 270 characters, more than the 253 of a DNS name: use a "
            "shorter "
            "job name or namespace"
        },
    ),
    # A replaced elastic worker's host name may use the whole 63-character label.
    "elastic host names at 253": (
        named("a" * 50, "n" * (253 - 63 - 50 - 6), job(2, elasticPolicy={"maxReplicas": 4})),
        {},
        {},
    ),
    "elastic host names at 254": (
        named("a" * 50, "n" * (254 - 63 - 50 - 6), job(2, elasticPolicy={"maxReplicas": 4})),
        {},
        {"metadata.name": "would be up to 254 characters, more than the 253 of a DNS name"},
    ),
}


@pytest.mark.parametrize(("obj", "options", "expected"), CASES.values(), ids=list(CASES))
def test_worker_counts_are_held_to_the_limit(
    obj: dict[str, Any], options: dict[str, Any], expected: dict[str, str]
) -> None:
    found = errors_of(obj, **options)
    assert set(found) == set(expected), found
    for path, words in expected.items():
        assert words in found[path], (path, found[path])


def test_normalize_alone_refuses_a_v1alpha1_split_over_the_limit() -> None:
    # normalize() is what maps the legacy fields: the split is refused there, before any job exists.
    with pytest.raises(InvalidMPIJob) as caught:
        normalize(v1alpha1(gpus=INT32_MAX))
    assert [e.path for e in caught.value.errors] == ["spec.gpus"]


@given(workers=st.integers(1, INT32_MAX), limit=st.integers(1, CEILING))
def test_a_job_validates_exactly_when_its_workers_are_within_the_limit(
    workers: int, limit: int
) -> None:
    found = errors_of(job(workers), max_workers=limit)
    if workers <= limit:
        assert found == {}
    else:
        assert list(found) == [f"{W}.replicas"]
        assert f"must be no more than {limit} workers" in found[f"{W}.replicas"]


@pytest.mark.parametrize(
    ("requested", "expected"), [(None, CEILING), (1, 1), (CEILING, CEILING), (250, 250)]
)
def test_worker_limit_may_only_lower_the_ceiling(requested: int | None, expected: int) -> None:
    assert worker_limit(requested) == expected


@pytest.mark.parametrize("requested", [0, -1, CEILING + 1, INT32_MAX])
def test_worker_limit_refuses_a_raise_or_nonsense(requested: int) -> None:
    with pytest.raises(ValueError, match=f"must be between 1 and {CEILING}, got {requested}"):
        worker_limit(requested)


def _schema_node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for name in path.split("."):
        node = node["properties"][name]
    return node


@pytest.mark.parametrize(
    ("path", "maximum"),
    [
        ("spec.mpiReplicaSpecs.Worker.replicas", CEILING),
        ("spec.elasticPolicy.minReplicas", CEILING),
        ("spec.elasticPolicy.maxReplicas", CEILING),
        ("spec.replicas", CEILING),
        ("spec.runPolicy.schedulingPolicy.minAvailable", CEILING + 1),
        ("spec.runPolicy.backoffLimit", INT32_MAX),
        ("spec.runPolicy.ttlSecondsAfterFinished", INT32_MAX),
        ("spec.runPolicy.activeDeadlineSeconds", 2**63 - 1),
        ("spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds", INT32_MAX),
    ],
)
def test_the_crd_carries_the_ceiling(path: str, maximum: int) -> None:
    for version in crd.custom_resource_definition()["spec"]["versions"]:
        assert _schema_node(version["schema"]["openAPIV3Schema"], path)["maximum"] == maximum
