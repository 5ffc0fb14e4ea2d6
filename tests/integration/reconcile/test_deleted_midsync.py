"""A job deleted while its sync is creating its workers stops getting children: the applier checks
the store between batches, so at most the batch in flight when the deletion reached the cache lands
after it (the garbage collector removes those). Before, every remaining worker was still created."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.reconcile.applier import SLOW_START_MAX
from mpi_operator.runtime.manager import Manager

from .harness import NS, OPERATOR_AGENT, idle, list_names, mpijob

WORKERS = 120


def requests_after_the_delete(kubesim: KubeSim) -> list[str]:
    """The operator's pod creates recorded after the test's DELETE of the MPIJob."""
    recorded = kubesim.control.recorded()
    deleted = next(
        i for i, r in enumerate(recorded) if r.verb == "delete" and r.resource == "mpijobs"
    )
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
            for r in kubesim.control.recorded(
                verb="create", resource="pods", user_agent=OPERATOR_AGENT
            )
            if r.status == 201
        )

    await eventually(lambda: pods_created() >= 3, sim=kubesim, what="the sync creating workers")
    await kube.delete(resources.MPIJOB, "big", namespace=NS)
    await eventually(
        lambda: idle(operator), within=60, what="the operator done with the deleted job"
    )
    late = requests_after_the_delete(kubesim)
    assert len(late) <= SLOW_START_MAX, f"{len(late)} worker creates after the deletion"
    assert pods_created() < WORKERS, "the sync stopped before creating every worker"


async def test_a_deleted_job_the_cache_still_holds_gets_no_children_again(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    # The MPIJob informer is blind (its LIST/WATCH answered 503, as an API under load may): the
    # cache keeps the job after its deletion, and each child the garbage collector removes syncs it
    # again. Before, every such sync re-created the child (found by bench/chaos.py: a write every
    # few ms).
    await kube.create(resources.MPIJOB, mpijob("gone", workers=1), namespace=NS)

    async def config_map() -> bool:
        return "gone-config" in await list_names(kube, resources.CONFIG_MAP)

    await eventually(config_map, sim=kubesim, what="the ConfigMap")
    kubesim.control.inject_error(
        503, method="GET", path="/mpijobs$", count=None, user_agent=OPERATOR_AGENT
    )
    kubesim.control.drop_watches()
    await kube.delete(resources.MPIJOB, "gone", namespace=NS)

    children = ("services", "configmaps", "secrets", "jobs")

    def late_creates() -> list[str]:
        recorded = kubesim.control.recorded()
        deleted = next(
            i for i, r in enumerate(recorded) if r.verb == "delete" and r.resource == "mpijobs"
        )
        return [
            f"{r.verb} {r.path}"
            for r in recorded[deleted:]
            if r.user_agent == OPERATOR_AGENT and r.verb == "create" and r.resource in children
        ]

    def confirmed_gone() -> bool:
        return any(
            r.status == 404
            for r in kubesim.control.recorded(
                verb="get", resource="mpijobs", user_agent=OPERATOR_AGENT
            )
        )

    # Either the operator reads the job and stops, or it goes on re-creating children.
    await eventually(
        lambda: confirmed_gone() or len(late_creates()) > len(children),
        sim=kubesim,
        within=30,
        what="the operator reading the job, or re-creating a child twice",
    )
    assert len(late_creates()) <= len(children), late_creates()
    await eventually(
        lambda: idle(operator), within=30, what="the operator done with the deleted job"
    )
    late = late_creates()
    # Each child at most once: the sync that found it gone reads the job before any second create.
    assert len(late) <= len(children), late
    assert len(late) == len(set(late)), late
    assert "gone" not in await list_names(kube, resources.SERVICE)
    assert "gone-config" not in await list_names(kube, resources.CONFIG_MAP)
