"""Pending is visible: on a cluster too small for the job, the MPIJob says how many workers the
scheduler cannot place, in its own words (the WorkersPending condition, last in the list, so the
State column shows it, and one Warning per change), and `mpi_operator_job_pending_workers` counts
them; once they fit, the condition and the count go."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.nodes import uniform
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, conditions, events_for, get_job, mpijob

NODE = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"}
GPU_WORKER = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
FIT_ERROR = (
    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
    "2 No preemption victims found for incoming pod."
)


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(
        nodes=uniform(2, NODE),
        start_seconds=0.1,
        ready_seconds=0.1,
        job_backoff_seconds=0.1,
        bookmark_seconds=0.5,
    )


def pending_gauge(operator: Manager, name: str) -> float | None:
    return operator.metrics.registry.get_sample_value(
        "mpi_operator_job_pending_workers", {"namespace": NS, "mpijob": name}
    )


def reconciles(operator: Manager) -> float:
    registry = operator.metrics.registry
    return sum(
        registry.get_sample_value("mpi_operator_reconcile_total", {"result": result}) or 0
        for result in ("success", "error", "requeue", "requeue_after")
    )


async def pending_warnings(kube: Kube, name: str) -> list[dict[str, Any]]:
    return [e for e in await events_for(kube, name) if e.get("reason") == "WorkersPending"]


@pytest.mark.parametrize("elastic", [False, True], ids=["static", "elastic"])
async def test_workers_that_do_not_fit_are_said_pending_until_they_fit(
    kubesim: KubeSim, kube: Kube, operator: Manager, elastic: bool
) -> None:
    spec: dict[str, Any] = (
        {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}} if elastic else {}
    )
    await kube.create(
        resources.MPIJOB, mpijob("pi", workers=3, worker_container=GPU_WORKER, **spec)
    )
    message = f"1/3 workers are Pending; pi-worker-2: {FIT_ERROR}"

    async def said() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        pending = conditions(job).get("WorkersPending")
        return job if pending is not None and pending["message"] == message else None

    job = await eventually(said, what="the WorkersPending condition")
    assert job["status"]["conditions"][-1]["type"] == "WorkersPending"
    assert conditions(job)["WorkersPending"]["reason"] == "Unschedulable"
    assert "Running" not in conditions(job) or conditions(job)["Running"]["status"] != "True"
    warnings = await eventually(lambda: pending_warnings(kube, "pi"), what="the Warning")
    assert [(w["type"], w["message"]) for w in warnings] == [("Warning", message)]
    assert pending_gauge(operator, "pi") == 1

    # Syncs that see the same situation say nothing new.
    before = reconciles(operator)
    for n in range(3):
        touch = {"metadata": {"annotations": {"touched": str(n)}}}
        await kube.patch(resources.MPIJOB, "pi", touch, namespace=NS)
    await eventually(lambda: reconciles(operator) > before, what="a sync after the touches")

    # Two workers fit: the third goes, and so do the condition and the count.
    two = {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}}
    await kube.patch(resources.MPIJOB, "pi", two, namespace=NS)

    async def placed() -> bool:
        return "WorkersPending" not in conditions(await get_job(kube, "pi"))

    await eventually(placed, what="the WorkersPending condition gone")
    assert pending_gauge(operator, "pi") == 0
    warnings = await pending_warnings(kube, "pi")
    assert [(w["message"], w.get("count", 1)) for w in warnings] == [(message, 1)]
