"""Worker pods the operator created that its pod cache never showed (`reconcile.expectations`):
found by `bench/chaos.py --ci` under load, where a job stayed without workers after a resume.

While the pod watch is down, a created pod counts as observed until the cache shows it. A pod
created and gone again before the watch came back is never shown, so its expectation used to stand
for its whole TTL, hiding the missing worker from every sync, and when it expired no sync followed
unless some other event came. Now the operator's own delete ends the expectation at once, and a sync
that still counts on one asks to run again when it expires.

The pod watch is blinded by refusing the operator's pod LISTs and WATCHes (its creates still pass),
and brought back through a compaction, so the watch relists and the store never holds the vanished
pods.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.reconcile.expectations import TTL
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock, quick_settings, running_operator

from .harness import NS, OPERATOR_AGENT, WITHIN, idle, mpijob, pods_of

BOTH = ["pi-worker-0", "pi-worker-1"]
SOON = TTL / 3
"""A bound well inside the expectations' TTL: what the operator does by then, it did not do because
an expectation ran out (the operator's clock flows with real time in these tests)."""


def blind_pod_watch(kubesim: KubeSim) -> None:
    kubesim.control.inject_error(
        503, method="GET", path="/pods$", count=None, user_agent=OPERATOR_AGENT
    )
    kubesim.control.drop_watches()


def restore_pod_watch(kubesim: KubeSim) -> None:
    kubesim.control.compact()
    kubesim.control.clear_faults()


def pod_lists(kubesim: KubeSim) -> int:
    """The operator's pod LISTs that succeeded (a relist after the compaction is the last of
    them)."""
    return sum(
        1
        for r in kubesim.control.recorded(verb="list", resource="pods", user_agent=OPERATOR_AGENT)
        if r.status == 200
    )


async def worker_names(kube: Kube, name: str) -> list[str]:
    pods = await pods_of(kube, name, "worker")
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


async def suspend(kube: Kube, name: str, value: bool) -> None:
    patch = {"spec": {"runPolicy": {"suspend": value}}}
    await kube.patch(resources.MPIJOB, name, patch, namespace=NS)


@contextlib.asynccontextmanager
async def stepped_operator(kubesim: KubeSim) -> AsyncIterator[tuple[SteppedClock, Manager]]:
    """The operator on a `SteppedClock` (so a test can move past the expectations' TTL), and that
    clock."""
    clock = SteppedClock()
    async with running_operator(quick_settings(kubesim), clock=clock, now=clock.utc_now) as mgr:
        yield clock, mgr


async def created_unseen(kubesim: KubeSim, kube: Kube, workers: int = 2) -> int:
    """Blinds the operator's pod watch and creates MPIJob `pi` with `workers` workers; returns, once
    they all exist, how many pod LISTs the operator had made before (see `relisted`)."""
    await eventually(lambda: kubesim.control.open_watches() > 0, what="the operator's watches")
    blind_pod_watch(kubesim)
    lists = pod_lists(kubesim)
    await kube.create(resources.MPIJOB, mpijob("pi", workers=workers), namespace=NS)
    names = [f"pi-worker-{index}" for index in range(workers)]
    await has_workers(kube, names, "the workers created while the pod cache is blind")
    return lists


async def has_workers(kube: Kube, names: list[str], what: str, within: float = WITHIN) -> None:
    async def check() -> bool:
        return await worker_names(kube, "pi") == names

    await eventually(check, within=within, what=what)


async def relisted(kubesim: KubeSim, mgr: Manager, lists_before: int) -> None:
    restore_pod_watch(kubesim)
    await eventually(lambda: pod_lists(kubesim) > lists_before, sim=kubesim, what="the pod relist")
    await eventually(lambda: idle(mgr), sim=kubesim, what="the operator idle after the relist")


async def test_workers_deleted_by_a_suspend_before_the_cache_saw_them_come_back_on_resume(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with stepped_operator(kubesim) as (_, mgr):
        lists = await created_unseen(kubesim, kube)
        await suspend(kube, "pi", True)
        await has_workers(kube, [], "the suspend deleting the workers it never saw in its cache")
        await relisted(kubesim, mgr, lists)
        await suspend(kube, "pi", False)
        await has_workers(kube, BOTH, "both workers created again on resume", within=SOON)


async def test_a_worker_gone_before_the_cache_saw_it_is_created_when_its_expectation_expires(
    kubesim: KubeSim, kube: Kube
) -> None:
    async with stepped_operator(kubesim) as (clock, mgr):
        lists = await created_unseen(kubesim, kube)
        # Someone else deletes a worker before the operator's cache ever showed it.
        await kube.delete(resources.POD, "pi-worker-0", namespace=NS)
        await has_workers(kube, ["pi-worker-1"], "worker-0 gone")
        await relisted(kubesim, mgr, lists)
        # The expectation for worker-0 still hides it; once it expires the job must be synced again,
        # although no event about the job comes.
        assert await worker_names(kube, "pi") == ["pi-worker-1"]
        clock.advance(TTL)
        await has_workers(
            kube, BOTH, "worker-0 created again once its expectation expired", within=SOON
        )


async def test_a_job_whose_only_worker_vanished_unseen_gets_it_again_when_its_expectation_expires(
    kubesim: KubeSim, kube: Kube
) -> None:
    """No pod of the job is left for the relist to show, so no pod event names it: what wakes it is
    the expiry a later sync of the job asked for (the one its own status write brings)."""
    async with stepped_operator(kubesim) as (clock, mgr):
        lists = await created_unseen(kubesim, kube, workers=1)
        await kube.delete(resources.POD, "pi-worker-0", namespace=NS)
        await has_workers(kube, [], "the worker gone")
        await relisted(kubesim, mgr, lists)
        assert await worker_names(kube, "pi") == []
        clock.advance(TTL)
        await has_workers(kube, ["pi-worker-0"], "the worker created again", within=SOON)
