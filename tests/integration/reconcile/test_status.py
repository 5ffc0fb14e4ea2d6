"""Status details through the API (upstream `TestLauncherActiveWorkerNotReady`, `TestMPIJobFailure`,
its failure handling and run policies): counts per replica type, eviction, failed workers, a
launcher Job deleted behind the operator's back, activeDeadlineSeconds, and the job metrics counted
once."""

from __future__ import annotations

from typing import Any

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    condition_true,
    conditions,
    get_job,
    list_names,
    mpijob,
    wait_condition,
    wait_event,
)


def replica_status(job: dict[str, Any], role: str) -> dict[str, Any] | None:
    return ((job.get("status") or {}).get("replicaStatuses") or {}).get(role)


async def wait_status(kube: Kube, what: str, check: Any, limit: float = 10.0) -> dict[str, Any]:
    async def matching_job() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        return job if check(job) else None

    return await eventually(matching_job, what=what, within=limit)


async def test_launcher_active_while_workers_pending(kube: Kube, operator: Manager) -> None:
    await kube.create(
        resources.MPIJOB, mpijob("pi", worker_annotations={"kubesim/start-seconds": "3600"})
    )
    job = await wait_status(
        kube, "Launcher.active == 1", lambda j: replica_status(j, "Launcher") == {"active": 1}
    )
    assert "active" not in (replica_status(job, "Worker") or {})
    assert "Running" not in conditions(job)


async def test_evicted_worker_fails_the_job_without_completing_it(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await wait_condition(kube, "pi", "Running")
    kubesim.controllers.kubelet.evict(NS, "pi-worker-1")
    job = await wait_condition(kube, "pi", "Failed")
    cond = conditions(job)["Failed"]
    assert (cond["reason"], cond["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
    assert "completionTime" not in job["status"]
    assert (replica_status(job, "Worker") or {}).get("failed") == 1
    assert (await wait_event(kube, "pi", "MPIJobEvicted"))["type"] == "Warning"


async def test_failed_worker_is_counted_not_replaced(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await wait_condition(kube, "pi", "Running")
    kubesim.controllers.kubelet.kill(NS, "pi-worker-0", exit_code=1)
    job = await wait_status(
        kube, "Worker.failed == 1", lambda j: (replica_status(j, "Worker") or {}).get("failed") == 1
    )
    assert not condition_true(job, "Failed")
    pod = await kube.get(resources.POD, "pi-worker-0", NS)
    assert pod["status"]["phase"] == "Failed"  # upstream never recreates a failed worker


async def test_launcher_job_deleted_externally_is_recreated(kube: Kube, operator: Manager) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    await wait_condition(kube, "pi", "Running")
    first = await kube.get(resources.JOB, "pi-launcher", NS)
    await kube.delete(resources.JOB, "pi-launcher", namespace=NS)

    async def recreated() -> bool:
        try:
            job = await kube.get(resources.JOB, "pi-launcher", NS)
        except Exception:
            return False
        return job["metadata"]["uid"] != first["metadata"]["uid"]

    await eventually(recreated, what="a new launcher Job")
    assert await list_names(kube, resources.JOB) == ["pi-launcher"]


async def test_active_deadline_fails_the_job_with_the_job_reason(
    kube: Kube, operator: Manager
) -> None:
    policy = {"activeDeadlineSeconds": 1, "ttlSecondsAfterFinished": 600, "backoffLimit": 3}
    await kube.create(resources.MPIJOB, mpijob("pi", runPolicy=policy))
    job = await wait_condition(kube, "pi", "Failed")
    cond = conditions(job)["Failed"]
    assert cond["reason"] == "DeadlineExceeded"
    launcher = await kube.get(resources.JOB, "pi-launcher", NS)
    # runPolicy reaches the launcher Job, whose controller enforces it.
    spec = launcher["spec"]
    assert (
        spec["activeDeadlineSeconds"],
        spec["ttlSecondsAfterFinished"],
        spec["backoffLimit"],
    ) == (
        1,
        600,
        3,
    )
    job_cond = next(c for c in launcher["status"]["conditions"] if c["type"] == "Failed")
    assert cond["message"] == job_cond["message"]
    assert "completionTime" in job["status"]


async def test_job_metrics_count_transitions_once(kube: Kube, operator: Manager) -> None:
    body = mpijob("pi", launcher_annotations={"kubesim/run-seconds": "0.3"})
    await kube.create(resources.MPIJOB, body)
    await wait_condition(kube, "pi", "Succeeded")
    registry = operator.metrics.registry

    async def counted() -> bool:
        return registry.get_sample_value("mpi_operator_jobs_successful_total") == 1

    await eventually(counted, what="one success counted")
    assert registry.get_sample_value("mpi_operator_jobs_created_total") == 1
    assert (
        registry.get_sample_value(
            "mpi_operator_job_info", {"launcher": "pi-launcher", "namespace": NS}
        )
        == 1
    )
