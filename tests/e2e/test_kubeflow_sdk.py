"""The Kubeflow training SDK (PyPI `kubeflow-training`, `TrainingClient(job_kind="MPIJob")`), as
data scientists drive MPIJobs, against kubesim and the operator: a kubeflow.org/v1 MPIJob built from
the SDK's own models reaches Running and Succeeded, its pods are found by replica type and index,
the launcher's log is read, the workers are scaled with `update_job`, and the job is deleted.

The SDK is synchronous (the `kubernetes` client), so its calls run in a thread beside the event loop
that serves kubesim. What it cannot do and the workaround are in docs/migration.md: its
`get_job_logs` looks for `job-role=master` by default, while the v2 launcher is `job-role=launcher`
(pass `is_master=False, replica_type="launcher"`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.runtime.manager import Manager

training = pytest.importorskip("kubeflow.training")
k8s = pytest.importorskip("kubernetes.client")

T = TypeVar("T")
NS = "default"


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(start_seconds=0.1, ready_seconds=0.1, bookmark_seconds=0.5)


def mpijob(name: str, *, workers: int, launcher_seconds: float | None = None) -> Any:
    """A v1 MPIJob made of the SDK's models; the launcher's container is `mpi`, the name the SDK
    reads logs from."""
    annotations = (
        {"kubesim/run-seconds": str(launcher_seconds)} if launcher_seconds is not None else None
    )

    def replica(replicas: int, annotations: dict[str, str] | None) -> Any:
        container = k8s.V1Container(name="mpi", image="mpioperator/mpi-pi:openmpi")
        return training.KubeflowOrgV1ReplicaSpec(
            replicas=replicas,
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(annotations=annotations),
                spec=k8s.V1PodSpec(containers=[container]),
            ),
        )

    return training.KubeflowOrgV1MPIJob(
        api_version="kubeflow.org/v1",
        kind="MPIJob",
        metadata=k8s.V1ObjectMeta(name=name, namespace=NS),
        spec=training.KubeflowOrgV1MPIJobSpec(
            slots_per_worker=1,
            run_policy=training.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            mpi_replica_specs={
                "Launcher": replica(1, annotations),
                "Worker": replica(workers, None),
            },
        ),
    )


POLLING: dict[str, Any] = {"polling_interval": 1, "wait_timeout": 60}
"""The SDK's own wait polls the job; a ceiling for a broken run, not a speed requirement."""


def training_client(kubesim: KubeSim) -> Any:
    return training.TrainingClient(
        config_file=str(kubesim.kubeconfig_path), namespace=NS, job_kind="MPIJob"
    )


async def sdk(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(call, *args, **kwargs)


async def test_the_training_sdk_drives_an_mpijob(kubesim: KubeSim, operator: Manager) -> None:
    client = training.TrainingClient(
        config_file=str(kubesim.kubeconfig_path), namespace=NS, job_kind="MPIJob"
    )
    await sdk(client.create_job, mpijob("sdk", workers=2))
    await sdk(
        client.wait_for_job_conditions,
        "sdk",
        expected_conditions={"Running"},
        polling_interval=1,
        wait_timeout=60,
    )
    assert await sdk(client.is_job_running, "sdk")

    workers = await sdk(client.get_job_pod_names, "sdk", replica_type="worker")
    assert sorted(workers) == ["sdk-worker-0", "sdk-worker-1"]
    assert await sdk(client.get_job_pod_names, "sdk", replica_type="worker", replica_index=1) == [
        "sdk-worker-1"
    ]
    (launcher,) = await sdk(client.get_job_pod_names, "sdk", replica_type="launcher")
    assert launcher.startswith("sdk-launcher-")

    logs, _ = await sdk(client.get_job_logs, "sdk", is_master=False, replica_type="launcher")
    assert list(logs) == [launcher]
    assert "is simulated by kubesim" in logs[launcher]
    assert await sdk(client.get_job_logs, "sdk") == ({}, {}), "job-role=master: no v2 pod has it"

    scaled = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}}
    await sdk(client.update_job, scaled, "sdk")

    async def three_workers() -> bool:
        names = await sdk(client.get_job_pod_names, "sdk", replica_type="worker")
        return sorted(names) == ["sdk-worker-0", "sdk-worker-1", "sdk-worker-2"]

    await eventually(three_workers, within=60, what="the third worker after update_job")

    await sdk(client.delete_job, "sdk")
    await eventually(lambda: jobs(kubesim) == [], sim=kubesim, what="the job gone")


async def test_the_training_sdk_sees_a_job_succeed(kubesim: KubeSim, operator: Manager) -> None:
    client = training.TrainingClient(
        config_file=str(kubesim.kubeconfig_path), namespace=NS, job_kind="MPIJob"
    )
    await sdk(client.create_job, mpijob("done", workers=1, launcher_seconds=1))
    job = await sdk(client.wait_for_job_conditions, "done", **POLLING)
    assert await sdk(client.is_job_succeeded, "done")
    assert {c.type for c in job.status.conditions} >= {"Created", "Running", "Succeeded"}


def jobs(kubesim: KubeSim) -> list[str]:
    found = kubesim.cluster.registry.by_kind("kubeflow.org/v2beta1", "MPIJob")
    assert found is not None
    return [o["metadata"]["name"] for o in kubesim.cluster.list(found, NS)["items"]]
