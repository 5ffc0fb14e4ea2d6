"""Builds MPIJobs and observed pods for the desired-state tests (a test helper, not a test
module)."""

from __future__ import annotations

import copy
from typing import Any

from mpi_operator.api.models import MPIJob

JOB_UID = "3f1b6a6e-0000-4000-8000-000000000001"


def container(name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "mpioperator/mpi-pi:openmpi", **fields}


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers) or [container()], **spec}}


def make_job(
    name: str = "pi",
    namespace: str = "default",
    *,
    workers: int | None = 2,
    worker_template: dict[str, Any] | None = None,
    launcher_template: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    worker_restart_policy: str | None = None,
    launcher_restart_policy: str | None = None,
    **spec: Any,
) -> MPIJob:
    """A canonical MPIJob; `spec` takes camelCase v2beta1 fields (`slotsPerWorker=4`, ...)."""
    replica_specs: dict[str, Any] = {"Launcher": {"template": launcher_template or template()}}
    if launcher_restart_policy is not None:
        replica_specs["Launcher"]["restartPolicy"] = launcher_restart_policy
    if workers is not None:
        replica_specs["Worker"] = {"replicas": workers, "template": worker_template or template()}
        if worker_restart_policy is not None:
            replica_specs["Worker"]["restartPolicy"] = worker_restart_policy
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": JOB_UID}
    if annotations:
        metadata["annotations"] = annotations
    return MPIJob.model_validate(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": metadata,
            "spec": {"mpiReplicaSpecs": replica_specs, **copy.deepcopy(spec)},
        }
    )


def worker_pod(
    job: MPIJob,
    index: int,
    *,
    phase: str = "Running",
    ready: bool = True,
    terminating: bool = False,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    """An observed worker pod as the API server would return it (only the fields discovery
    reads)."""
    metadata: dict[str, Any] = {
        "name": f"{job.name}-worker-{index}",
        "namespace": job.namespace,
        "labels": {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": job.name,
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": str(index),
        },
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v2beta1",
                "kind": "MPIJob",
                "name": job.name,
                "uid": owner_uid or job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if terminating:
        metadata["deletionTimestamp"] = "2026-11-25T22:00:00Z"
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": metadata, "status": {"phase": phase, "conditions": conditions}}
