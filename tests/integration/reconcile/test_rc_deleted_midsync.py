"""A job deleted while its sync is creating its workers stops getting children: the applier checks the
store between batches, so at most the batch in flight when the deletion reached the cache lands after it
(the garbage collector removes those). Before, every remaining worker was still created."""

from __future__ import annotations

from rc_harness import NS, OPERATOR_AGENT, idle, mpijob

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.controller.applier import SLOW_START_MAX
from mpi_operator.controller.manager import Manager
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

WORKERS = 120


def requests_after_the_delete(kubesim: KubeSim) -> list[str]:
    """The operator's pod creates recorded after the test's DELETE of the MPIJob."""
    recorded = kubesim.control.recorded()
    deleted = next(i for i, r in enumerate(recorded) if r.verb == "delete" and r.resource == "mpijobs")
    return [
        r.path
        for r in recorded[deleted:]
        if r.user_agent == OPERATOR_AGENT and r.verb == "create" and r.resource == "pods"
    ]


async def test_no_more_workers_once_the_job_is_deleted(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    # Each pod create takes a while, so the sync is still creating when the job goes.
    kubesim.control.inject_latency(0.02, method="POST", path="/pods$")
    await kube.create(resources.MPIJOB, mpijob("big", workers=WORKERS), namespace=NS)

    def pods_created() -> int:
        return sum(
            1
            for r in kubesim.control.recorded(verb="create", resource="pods", user_agent=OPERATOR_AGENT)
            if r.status == 201
        )

    await eventually(lambda: pods_created() >= 3, sim=kubesim, what="the sync creating workers")
    await kube.delete(resources.MPIJOB, "big", namespace=NS)
    await eventually(lambda: idle(operator), within=60, what="the operator done with the deleted job")
    late = requests_after_the_delete(kubesim)
    assert len(late) <= SLOW_START_MAX, f"{len(late)} worker creates after the deletion"
    assert pods_created() < WORKERS, "the sync stopped before creating every worker"
