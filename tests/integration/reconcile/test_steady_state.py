"""A converged job's reconcile makes ZERO writes (docs/architecture.md#decisions-and-why), asserted
from kubesim's request record filtered by the operator's user agent, while reconciles demonstrably
run (MPIJob and pod updates that change nothing the operator owns) until the operator is idle again;
running and finished jobs alike."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    get_job,
    list_names,
    mpijob,
    operator_writes,
    reconciles,
    settle,
    wait_condition,
)


async def touch(kube: Kube, i: int) -> None:
    """Updates the job and a worker without changing anything the operator owns (each means a
    reconcile)."""
    patch = {"metadata": {"annotations": {"touched": str(i)}}}
    await kube.patch(resources.MPIJOB, "pi", patch, namespace=NS)
    await kube.patch(resources.POD, "pi-worker-0", patch, namespace=NS)


async def test_running_job_reconciles_without_writes(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await wait_condition(kube, "pi", "Running")

    async def workers_ready() -> bool:  # the last change: Ready workers enter discover_hosts.sh
        return (await get_job(kube, "pi"))["status"]["replicaStatuses"]["Worker"].get("ready") == 2

    await eventually(workers_ready, what="Worker.ready == 2")
    await settle(kube, operator, "pi")  # the trailing events of the convergence handled
    before = reconciles(operator)
    kubesim.control.clear_requests()
    for i in range(3):
        await touch(kube, i)

    async def reconciled() -> bool:
        return reconciles(operator) >= before + 3

    await eventually(reconciled, what="reconciles triggered by the updates")
    await settle(kube, operator, "pi")
    writes = operator_writes(kubesim)
    assert writes == [], f"a converged job's reconcile wrote: {writes}"


async def test_finished_job_reconciles_without_writes(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    body = mpijob(
        "pi",
        launcher_annotations={"kubesim/run-seconds": "0.3"},
        runPolicy={"cleanPodPolicy": "All"},
    )
    await kube.create(resources.MPIJOB, body)
    await wait_condition(kube, "pi", "Succeeded")

    async def cleaned() -> bool:
        return await list_names(kube, resources.POD, "mpi_role_type=worker") == []

    await eventually(cleaned, what="the workers to be cleaned up")
    await settle(kube, operator, "pi")
    kubesim.control.clear_requests()
    before = reconciles(operator)
    for i in range(3):
        patch = {"metadata": {"annotations": {"touched": str(i)}}}
        await kube.patch(resources.MPIJOB, "pi", patch, namespace=NS)

    async def reconciled() -> bool:
        return reconciles(operator) >= before + 1

    await eventually(reconciled, what="reconciles triggered by the updates")
    await settle(kube, operator, "pi")
    writes = operator_writes(kubesim)
    assert writes == [], f"a finished job's reconcile wrote: {writes}"
