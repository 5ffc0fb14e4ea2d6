"""`runPolicy.managedBy` (upstream `TestDoNothingWithMPIJobManagedExternally`, integration
`TestMPIJobManagedExternally`, e2e "managedBy multikueue" and "managedBy explicit"): a job managed
by another controller gets nothing from this operator, not a child, not a status, not an event; one
that names this operator explicitly runs as usual."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import OPERATOR_AGENT, events_for, get_job, list_names, mpijob, wait_condition


async def test_job_managed_elsewhere_is_left_alone(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    await kube.create(
        resources.MPIJOB, mpijob("other", runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    )
    # A job of ours created afterwards converges, so the other one has been seen by now.
    await kube.create(
        resources.MPIJOB, mpijob("ours", runPolicy={"managedBy": "kubeflow.org/mpi-operator"})
    )
    await wait_condition(kube, "ours", "Running")
    registry = operator.metrics.registry

    async def both_reconciled() -> bool:
        return (
            registry.get_sample_value("mpi_operator_reconcile_total", {"result": "success"}) or 0
        ) >= 2

    await eventually(both_reconciled, what="reconciles of both jobs")
    other = await get_job(kube, "other")
    assert "status" not in other or not other["status"]
    assert await events_for(kube, "other") == []
    for resource in (resources.SERVICE, resources.CONFIG_MAP, resources.SECRET, resources.JOB):
        assert not [n for n in await list_names(kube, resource) if n.startswith("other")]
    assert await list_names(kube, resources.POD, "mpi_job_name=other") == []
    touched = [
        r for r in kubesim.control.recorded(user_agent=OPERATOR_AGENT) if r.name.startswith("other")
    ]
    assert [r.verb for r in touched if r.verb not in ("get", "list", "watch")] == []
