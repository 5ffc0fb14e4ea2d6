"""API failures during reconciles (docs/architecture.md#where-state-lives; upstream
`TestUnsuspendLauncherUpdateFailureDoesNotPoisonCache`): 5xx answers and dropped watches delay
convergence but lose nothing and duplicate nothing; a failed launcher update on resume leaves the
informer cache untouched and succeeds on retry."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, get_job, list_names, mpijob, wait_condition


async def test_server_errors_and_dropped_watches_converge_without_duplicates(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    control = kubesim.control
    control.inject_error(500, method="POST", path=r"/pods$", count=3)
    control.inject_error(503, method="PATCH", path=r"/mpijobs/pi/status$", count=2)
    await kube.create(resources.MPIJOB, mpijob("pi", workers=3))

    async def service_exists() -> bool:
        return await list_names(kube, resources.SERVICE) == ["pi"]

    await eventually(service_exists, what="the Service")
    assert control.drop_watches() > 0  # mid-convergence: the informers must re-watch and catch up
    await wait_condition(kube, "pi", "Running")
    assert await list_names(kube, resources.POD, "mpi_job_name=pi,mpi_role_type=worker") == [
        "pi-worker-0",
        "pi-worker-1",
        "pi-worker-2",
    ]
    assert await list_names(kube, resources.JOB) == ["pi-launcher"]
    assert len(await list_names(kube, resources.SECRET)) == 1


async def test_failed_resume_does_not_poison_the_cache(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi", runPolicy={"suspend": True}))
    await wait_condition(kube, "pi", "Suspended")
    rule = kubesim.control.inject_error(503, method="PUT", path=r"/jobs/pi-launcher$", count=None)
    await kube.patch(
        resources.MPIJOB, "pi", {"spec": {"runPolicy": {"suspend": False}}}, namespace=NS
    )

    async def failed_twice() -> bool:
        return rule.hits >= 2

    await eventually(failed_twice, what="two failed launcher updates", within=15)
    assert operator.stores is not None
    cached = operator.stores.jobs.get(f"{NS}/pi-launcher")
    assert cached is not None
    assert cached["spec"]["suspend"] is True, "a failed update changed the informer's copy"
    assert (await get_job(kube, "pi"))["spec"]["runPolicy"]["suspend"] is False
    kubesim.control.clear_faults()
    await wait_condition(kube, "pi", "Running")
    assert not (await kube.get(resources.JOB, "pi-launcher", NS))["spec"].get("suspend")
