"""What the informers keep of each object (`cache.transforms`), table-driven: for every resource,
the paths its transform strips and the paths it must keep because some reader reads them; plus the
properties every transform has (the input is never mutated, repeated strings are shared)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.cache import transforms
from mpi_operator.runtime import handlers
from mpi_operator.settings import GangScheduler

MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pi-worker-0",
            "namespace": "default",
            "uid": "u1",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-01T00:01:00Z",
            "labels": {"training.kubeflow.org/job-role": "worker"},
            "annotations": {"mpi-operator.kubeflow.org/incarnation": "2"},
            "ownerReferences": [{"kind": "MPIJob", "name": "pi", "uid": "j1", "controller": True}],
            "managedFields": MANAGED,
        },
        "spec": {
            "hostname": "pi-worker-0-r2",
            "subdomain": "pi",
            "nodeName": "node-1",
            "containers": [{"name": "main", "image": "x", "env": [{"name": "A", "value": "1"}]}],
            "volumes": [{"name": "ssh", "secret": {"secretName": "pi-ssh"}}],
        },
        "status": {
            "phase": "Running",
            "reason": "Evicted",
            "message": "low on memory",
            "startTime": "2026-01-01T00:00:01Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
            "podIP": "10.0.0.1",
            "hostIP": "192.168.0.1",
            "qosClass": "BestEffort",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 1,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                    "image": "x",
                    "imageID": "docker://sha256:0",
                    "containerID": "docker://0",
                }
            ],
        },
    }


def job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "default",
            "managedFields": MANAGED,
            "labels": {},
        },
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}},
        "status": {"active": 1},
    }


def path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def has(obj: Any, dotted: str) -> bool:
    try:
        path(obj, dotted)
    except (KeyError, IndexError):
        return False
    return True


POD_KEPT = [
    "apiVersion",
    "kind",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.resourceVersion",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "metadata.labels",
    "metadata.annotations",
    "metadata.ownerReferences.0.controller",
    "spec.hostname",  # elastic.identity: the incarnation
    "spec.subdomain",
    "status.phase",
    "status.reason",  # eviction
    "status.message",
    "status.startTime",
    "status.conditions.0.status",  # readiness: Ready, now the first
    "status.containerStatuses.0.ready",
    "status.containerStatuses.0.restartCount",  # elastic.hosts: restarted
    "status.containerStatuses.0.state.running",
    "status.containerStatuses.0.lastState.terminated.exitCode",
]
POD_STRIPPED = [
    "metadata.managedFields",
    "spec.containers",
    "spec.volumes",
    "spec.nodeName",  # no sync reads it: the binding would be an update that matters
    "status.conditions.1",  # PodScheduled is never read
    "status.podIP",
    "status.hostIP",
    "status.qosClass",
    "status.containerStatuses.0.image",
    "status.containerStatuses.0.imageID",
    "status.containerStatuses.0.containerID",
]
JOB_KEPT = [
    "metadata.name",
    "metadata.labels",
    "spec.template.spec.containers.0.image",
    "status.active",
]
JOB_STRIPPED = ["metadata.managedFields"]

UPDATED_KINDS = ("jobs", "configmaps", "secrets", "services")
"""Kinds the operator may PUT from its cache: only managedFields may go (the same shape serves all
four)."""
CASES = [
    *[("pods", pod, p, True) for p in POD_KEPT],
    *[("pods", pod, p, False) for p in POD_STRIPPED],
    *[(plural, job, p, True) for plural in UPDATED_KINDS for p in JOB_KEPT],
    *[(plural, job, p, False) for plural in UPDATED_KINDS for p in JOB_STRIPPED],
]


@pytest.mark.parametrize(
    ("plural", "make", "dotted", "kept"), CASES, ids=lambda v: getattr(v, "__name__", v)
)
def test_transform_keeps_what_is_read_and_strips_the_rest(
    plural: str, make: Any, dotted: str, kept: bool
) -> None:
    obj = make()
    assert has(obj, dotted), "the case must start with the field present"
    out = transforms.for_resource("", plural)(obj)
    assert has(out, dotted) is kept
    if kept and not dotted.startswith("status.conditions"):
        assert path(out, dotted) == path(obj, dotted)


@pytest.mark.parametrize("plural", ["pods", "jobs", "mpijobs"])
def test_transform_never_mutates_its_input(plural: str) -> None:
    obj = pod()
    before = copy.deepcopy(obj)
    transforms.for_resource("", plural)(obj)
    assert obj == before


def test_repeated_strings_are_shared_between_objects() -> None:
    key, value = "training.kubeflow.org/job-role", "worker"
    # Built apart, as the JSON decoder builds them: equal strings, distinct objects.
    fresh_key, fresh_value = (
        "".join(["training.kubeflow.org/", "job-role"]),
        "".join(["wor", "ker"]),
    )
    assert (fresh_key, fresh_value) == (key, value)
    assert fresh_key is not key
    a, b = pod(), pod()
    a["metadata"]["labels"] = {key: value}
    b["metadata"]["labels"] = {fresh_key: fresh_value}
    (ka, va), (kb, vb) = (
        next(iter(transforms.pod(o)["metadata"]["labels"].items())) for o in (a, b)
    )
    assert ka is kb
    assert va is vb


def test_owner_references_are_shared_between_a_jobs_pods() -> None:
    a, b = pod(), pod()
    b["metadata"]["ownerReferences"] = [
        {
            "kind": "".join(["MPI", "Job"]),
            "name": "pi",
            "uid": "".join(["j", "1"]),
            "controller": True,
        }
    ]
    ra, rb = (transforms.pod(o)["metadata"]["ownerReferences"][0] for o in (a, b))
    assert ra == rb
    assert ra["kind"] is rb["kind"]
    assert ra["uid"] is rb["uid"]


def test_a_pod_keeps_its_ready_condition_only() -> None:
    assert transforms.pod(pod())["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


def test_a_pod_keeps_its_disruption_target_condition() -> None:
    """elastic.losses reads it: a worker the cluster took is not a program failure."""
    taken = pod()
    target = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    taken["status"]["conditions"].append(target)
    assert transforms.pod(taken)["status"]["conditions"][-1] == target


def test_a_pod_keeps_pod_scheduled_only_while_it_is_not_placed() -> None:
    waiting = pod()
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    waiting["status"]["conditions"] = [unschedulable]
    assert transforms.pod(waiting)["status"]["conditions"] == [unschedulable]


def test_an_object_without_metadata_passes_through() -> None:
    assert transforms.strip_managed_fields({"kind": "X"}) == {"kind": "X"}


@pytest.mark.parametrize("gang", [None, "volcano", "scheduler-plugins"])
def test_every_informer_of_the_operator_has_a_transform(gang: GangScheduler | None) -> None:
    for watch in handlers.watches(gang, handlers.WatchSelectors.owned_only()):
        with_managed = {"metadata": {"name": "x", "managedFields": MANAGED}}
        assert "managedFields" not in watch.transform(with_managed)["metadata"], watch.name
    table = {w.name: w.transform for w in handlers.watches(None, handlers.WatchSelectors())}
    assert table["pods"] is transforms.pod
