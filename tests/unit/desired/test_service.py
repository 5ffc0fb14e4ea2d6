"""desired.service: the headless Service `<job>`."""

from __future__ import annotations

import pytest

from mpi_operator.desired.service import build_service

from .factory import JOB_UID, make_job

OWNER = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "name": "pi",
    "uid": JOB_UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


@pytest.mark.parametrize(
    ("launcher_as_worker", "extra_spec"),
    [(False, {}), (True, {"publishNotReadyAddresses": True})],
    ids=["default", "launcher-as-worker"],
)
def test_service(launcher_as_worker: bool, extra_spec: dict[str, object]) -> None:
    job = make_job("pi", "default", runLauncherAsWorker=launcher_as_worker)
    assert build_service(job) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "pi",
            "namespace": "default",
            "labels": {"app": "pi"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
            },
            **extra_spec,
        },
    }
