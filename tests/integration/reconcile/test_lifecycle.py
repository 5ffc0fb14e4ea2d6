"""Whole life cycles with kubesim's kubelet and Job controller, as upstream's integration and e2e
tests drive them (`TestMPIJobSuccess`, `TestMPIJobWaitWorkers`, `TestMPIJobFailure`, e2e "malformed
command" and "root": Failed and Succeeded), asserting our wire formats: conditions, reasons,
messages, replica statuses, completionTime, events, and cleanPodPolicy applied after the finish."""

from __future__ import annotations

from typing import Any

from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.objects import is_pod_ready
from mpi_operator.runtime.manager import Manager

from .harness import (
    NS,
    condition_true,
    conditions,
    get_job,
    list_names,
    mpijob,
    pods_of,
    wait_condition,
    wait_event,
)


async def test_success_wait_for_workers_then_run_then_clean_up(
    kube: Kube, operator: Manager
) -> None:
    body = mpijob(
        "pi",
        worker_annotations={"kubesim/ready-seconds": "0.6"},
        launcher_annotations={"kubesim/run-seconds": "0.8"},
        launcherCreationPolicy="WaitForWorkersReady",
        runPolicy={"cleanPodPolicy": "Running"},
    )
    await kube.create(resources.MPIJOB, body)

    async def launcher_job() -> dict[str, Any] | None:
        items, _ = await kube.list(resources.JOB, NS)
        return items[0] if items else None

    job = await eventually(launcher_job, what="the launcher Job")
    # WaitForWorkersReady: the Job appears only after every worker is Ready.
    workers = await pods_of(kube, "pi", "worker")
    assert len(workers) == 2
    assert all(is_pod_ready(p) for p in workers), "launcher created before the workers were Ready"
    assert job["metadata"]["name"] == "pi-launcher"

    running = await wait_condition(kube, "pi", "Running")
    cond = conditions(running)["Running"]
    assert (cond["reason"], cond["message"]) == ("MPIJobRunning", "MPIJob default/pi is running.")
    assert running["status"]["replicaStatuses"]["Launcher"] == {"active": 1}
    assert running["status"]["replicaStatuses"]["Worker"]["active"] == 2
    assert running["status"]["replicaStatuses"]["Worker"]["ready"] == 2
    event = await wait_event(kube, "pi", "MPIJobRunning")
    assert event["message"] == "MPIJob default/pi is running"

    done = await wait_condition(kube, "pi", "Succeeded")
    cond = conditions(done)["Succeeded"]
    assert (cond["reason"], cond["message"]) == (
        "MPIJobSucceeded",
        "MPIJob default/pi successfully completed.",
    )
    assert conditions(done)["Running"]["status"] == "False"
    assert "completionTime" in done["status"]
    assert done["status"]["replicaStatuses"]["Launcher"] == {"succeeded": 1}
    assert (await wait_event(kube, "pi", "MPIJobSucceeded"))["type"] == "Normal"

    # Two-phase finish: the next sync applies cleanPodPolicy Running to the (still running) workers.
    async def workers_gone() -> bool:
        return await list_names(kube, resources.POD, "mpi_job_name=pi,mpi_role_type=worker") == []

    await eventually(workers_gone, what="the workers to be deleted (cleanPodPolicy Running)")

    async def worker_status_cleared() -> bool:
        return (await get_job(kube, "pi"))["status"]["replicaStatuses"].get("Worker") == {}

    await eventually(worker_status_cleared, what="replicaStatuses.Worker to become {}")
    # The launcher Job and its pod are left alone (logs stay readable).
    assert await list_names(kube, resources.JOB) == ["pi-launcher"]
    assert len(await pods_of(kube, "pi", "launcher")) == 1


async def test_wait_for_workers_ready_holds_the_launcher_back(
    kube: Kube, operator: Manager
) -> None:
    body = mpijob(
        "pi",
        worker_annotations={"kubesim/ready": "false"},
        launcherCreationPolicy="WaitForWorkersReady",
    )
    await kube.create(resources.MPIJOB, body)

    async def workers_running() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        workers = ((job.get("status") or {}).get("replicaStatuses") or {}).get("Worker") or {}
        return job if workers.get("active") == 2 else None

    job = await eventually(workers_running, what="Worker.active == 2")
    assert "Launcher" not in job["status"]["replicaStatuses"]
    assert await list_names(kube, resources.JOB) == []

    for i in range(2):
        patch = {"metadata": {"annotations": {"kubesim/ready": "true"}}}
        await kube.patch(resources.POD, f"pi-worker-{i}", patch, namespace=NS)

    async def launcher_exists() -> bool:
        return await list_names(kube, resources.JOB) == ["pi-launcher"]

    await eventually(launcher_exists, what="the launcher Job once the workers are Ready")
    await wait_condition(kube, "pi", "Running")
    assert (await wait_event(kube, "pi", "MPIJobRunning"))["type"] == "Normal"


async def test_failing_launcher_retries_then_fails_with_upstream_reason(
    kube: Kube, operator: Manager
) -> None:
    body = mpijob(
        "pi",
        launcher_annotations={"kubesim/run-seconds": "0.2", "kubesim/exit-code": "1"},
        launcher_container={
            "name": "main",
            "image": "mpioperator/mpi-pi:openmpi",
            "command": ["mpirun"],
        },
        runPolicy={"backoffLimit": 1, "cleanPodPolicy": "All"},
    )
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    await kube.create(resources.MPIJOB, body)

    async def launcher_failed_once() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        launcher = ((job.get("status") or {}).get("replicaStatuses") or {}).get("Launcher") or {}
        return job if launcher.get("failed") == 1 else None

    # TestMPIJobFailure, first half: a failed launcher pod alone does not fail the MPIJob.
    job = await eventually(launcher_failed_once, what="Launcher.failed == 1", within=15)
    assert not condition_true(job, "Failed")

    failed = await wait_condition(kube, "pi", "Failed")
    cond = conditions(failed)["Failed"]
    launcher_job = await kube.get(resources.JOB, "pi-launcher", NS)
    job_failed = next(c for c in launcher_job["status"]["conditions"] if c["type"] == "Failed")
    assert job_failed["reason"] == "BackoffLimitExceeded"
    # Upstream appends the newest failed launcher pod's reason and message after
    # BackoffLimitExceeded.
    newest = max(
        (p for p in await pods_of(kube, "pi", "launcher") if p["status"]["phase"] == "Failed"),
        key=lambda p: p["metadata"]["creationTimestamp"],
    )
    assert cond["reason"] == "BackoffLimitExceeded/" + newest["status"].get("reason", "")
    assert cond["message"] == job_failed["message"] + ": " + newest["status"].get("message", "")
    assert failed["status"]["replicaStatuses"]["Launcher"] == {"failed": 2}
    assert "completionTime" in failed["status"]
    event = await wait_event(kube, "pi", cond["reason"])
    assert event["type"] == "Warning"
    assert not condition_true(failed, "Succeeded")

    async def workers_gone() -> bool:
        return await list_names(kube, resources.POD, "mpi_job_name=pi,mpi_role_type=worker") == []

    await eventually(workers_gone, what="the workers to be deleted (cleanPodPolicy All)")
