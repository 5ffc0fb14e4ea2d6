"""runPolicy.suspend through the API (upstream `TestCreateSuspendedMPIJob`,
`TestSuspendedRunningMPIJob`, `TestResumeMPIJob`, `TestResumeMPIJobWithExistingLauncher`,
integration `TestMPIJobResumingAndSuspending`, e2e "suspended on creation, then resume ->
Succeeded")."""

from __future__ import annotations

from typing import Any

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

WORKERS = "mpi_job_name=pi,mpi_role_type=worker"


async def set_suspend(
    kube: Kube, value: bool, launcher_template: dict[str, Any] | None = None
) -> None:
    patch: dict[str, Any] = {"spec": {"runPolicy": {"suspend": value}}}
    if launcher_template is not None:
        patch["spec"]["mpiReplicaSpecs"] = {"Launcher": {"template": launcher_template}}
    await kube.patch(resources.MPIJOB, "pi", patch, namespace=NS)


async def test_suspend_resume_life_cycle(kube: Kube, operator: Manager) -> None:
    body = mpijob(
        "pi", launcher_annotations={"kubesim/run-seconds": "1.0"}, runPolicy={"suspend": True}
    )
    await kube.create(resources.MPIJOB, body)

    # Created suspended: Service, ConfigMap, Secret and a suspended launcher Job; no workers, no
    # startTime.
    job = await wait_condition(kube, "pi", "Suspended")
    conds = conditions(job)
    assert [c["type"] for c in job["status"]["conditions"]] == ["Created", "Suspended", "Running"]
    assert (conds["Suspended"]["reason"], conds["Suspended"]["message"]) == (
        "MPIJobSuspended",
        "MPIJob suspended",
    )
    assert (
        conds["Running"]["status"],
        conds["Running"]["reason"],
        conds["Running"]["message"],
    ) == (
        "False",
        "MPIJobSuspended",
        "MPIJob default/pi is suspended.",
    )
    assert "startTime" not in job["status"]
    assert job["status"]["replicaStatuses"] == {"Launcher": {}, "Worker": {}}
    launcher = await kube.get(resources.JOB, "pi-launcher", NS)
    assert launcher["spec"]["suspend"] is True
    assert await list_names(kube, resources.SERVICE) == ["pi"]
    assert await list_names(kube, resources.CONFIG_MAP) == ["pi-config"]
    assert await list_names(kube, resources.SECRET) == ["pi-ssh"]
    assert await list_names(kube, resources.POD) == []
    await wait_event(kube, "pi", "MPIJobSuspended")

    # Resume with scheduling directives injected into the launcher template (as Kueue does).
    template = {
        "metadata": {"labels": {"kueue": "yes"}, "annotations": {"kubesim/run-seconds": "1.0"}},
        "spec": {
            "nodeSelector": {"pool": "gpu"},
            "containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}],
        },
    }
    await set_suspend(kube, False, template)
    await wait_event(kube, "pi", "MPIJobResumed")

    async def resumed() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        cond = conditions(job).get("Suspended", {})
        return job if cond.get("status") == "False" and "startTime" in job["status"] else None

    job = await eventually(resumed, what="Suspended=False and a startTime")
    assert conditions(job)["Suspended"]["reason"] == "MPIJobResumed"

    async def workers(count: int) -> bool:
        return len(await list_names(kube, resources.POD, WORKERS)) == count

    await eventually(lambda: workers(2), what="two worker pods after resume")
    launcher = await kube.get(resources.JOB, "pi-launcher", NS)
    assert not launcher["spec"].get("suspend")
    assert launcher["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert launcher["spec"]["template"]["metadata"]["labels"]["kueue"] == "yes"

    # Running -> suspended: launcher suspended, workers deleted, Suspended=True, Running=False.
    await wait_condition(kube, "pi", "Running")
    await set_suspend(kube, True)

    async def suspended_again() -> dict[str, Any] | None:
        job = await get_job(kube, "pi")
        return (
            job if condition_true(job, "Suspended") and not condition_true(job, "Running") else None
        )

    job = await eventually(suspended_again, what="Suspended=True and Running=False")
    await eventually(lambda: workers(0), what="the workers to be deleted on suspend")
    assert (await kube.get(resources.JOB, "pi-launcher", NS))["spec"]["suspend"] is True
    assert job["status"]["replicaStatuses"]["Worker"] == {}

    # Resume again: runs to completion.
    await set_suspend(kube, False)
    done = await wait_condition(kube, "pi", "Succeeded")
    assert done["status"]["replicaStatuses"]["Launcher"] == {"succeeded": 1}
