"""Upstream's simple scaling of Worker.replicas (static jobs): scale up creates the missing indices
and grows the hostfile, scale down deletes every pod at or above the new count; through a spec patch
and through the scale subresource (`kubectl scale`, an autoscaler), which reads back the worker
selector."""

from __future__ import annotations

import pytest

from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, get_job, list_names, mpijob, wait_condition

WORKERS = "mpi_job_name=pi,mpi_role_type=worker"


async def scale(kube: Kube, replicas: int, via: str) -> None:
    if via == "spec":
        patch = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}}
        await kube.patch(resources.MPIJOB, "pi", patch, namespace=NS)
    else:
        await kube.patch(
            resources.MPIJOB,
            "pi",
            {"spec": {"replicas": replicas}},
            namespace=NS,
            subresource="scale",
        )


async def workers_are(kube: Kube, count: int) -> None:
    expected = [f"pi-worker-{i}" for i in range(count)]

    async def check() -> bool:
        return await list_names(kube, resources.POD, WORKERS) == expected

    await eventually(check, what=f"worker pods {expected}")


@pytest.mark.parametrize("via", ["spec", "scale-subresource"])
async def test_scale_up_then_down(kube: Kube, operator: Manager, via: str) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi", workers=2))
    await wait_condition(kube, "pi", "Running")

    await scale(kube, 4, via)
    await workers_are(kube, 4)

    async def hostfile_lines(count: int) -> bool:
        config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
        return config["data"]["hostfile"].count("\n") == count

    await eventually(lambda: hostfile_lines(4), what="a 4-line hostfile")

    async def four_active() -> bool:
        status = (await get_job(kube, "pi"))["status"]
        return status["replicaStatuses"]["Worker"].get("active") == 4

    await eventually(four_active, what="Worker.active == 4")

    await scale(kube, 1, via)
    await workers_are(kube, 1)
    await eventually(lambda: hostfile_lines(1), what="a 1-line hostfile")
    # The scale subresource answers with the selector the status publishes (what an HPA needs).
    scale_view = await kube.patch(
        resources.MPIJOB, "pi", {"spec": {"replicas": 1}}, namespace=NS, subresource="scale"
    )
    assert scale_view["spec"]["replicas"] == 1
    assert scale_view["status"]["selector"] == (
        "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker,"
        "training.kubeflow.org/operator-name=mpi-operator"
    )
