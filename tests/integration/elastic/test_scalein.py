"""Graceful scale-in: the highest index leaves discovery at once, its pod is drained (annotated,
counted in status) and deleted only after `scaleInGracePeriodSeconds`; scaling back out during the
grace reuses the draining pod instead of starting a new one. The grace runs on the operator's
`SteppedClock`: the scale-out lands within it however slow the machine, and the deletion's time on
that clock shows it came no earlier than the grace."""

from __future__ import annotations

from datetime import timedelta

import aiohttp
from chaoslib.steps import scale

from integration.reconcile.harness import settle, wait_condition
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.elastic import DRAINING_ANNOTATION
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock

from .harness import (
    Terminations,
    draining_since,
    elastic_job,
    elastic_status,
    host,
    wait_mounted,
    worker_pods,
)

GRACE = 600
"""scaleInGracePeriodSeconds: far beyond the test's own duration, so only the clock's jump ends
it."""


async def draining(kube: Kube, job: str) -> dict[str, str]:
    """Worker pod name -> its draining-since stamp, for the pods that carry one."""
    return {
        name: annotations[DRAINING_ANNOTATION]
        for name, pod in (await worker_pods(kube, job)).items()
        if DRAINING_ANNOTATION in (annotations := pod["metadata"].get("annotations") or {})
    }


async def test_scale_in_drains_the_highest_index_and_a_scale_out_during_grace_reuses_it(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
) -> None:
    await kube.create(resources.MPIJOB, elastic_job("si", workers=3, grace=GRACE))
    await wait_condition(kube, "si", "Running")
    all_three = [host("si", i) for i in range(3)]
    await wait_mounted(kube, kubesim, http, "si", all_three)
    uid = (await worker_pods(kube, "si"))["si-worker-2"]["metadata"]["uid"]

    await scale(kube, "si", 2, "edit")
    await wait_mounted(kube, kubesim, http, "si", all_three[:2])
    assert list(await draining(kube, "si")) == ["si-worker-2"], "only the highest index drains"

    async def one_draining() -> bool:
        status = await elastic_status(kube, "si")
        assert (status.get("draining"), status.get("discovered")) == (1, 2), status
        return True

    await eventually(one_draining, what="status: 1 draining, 2 discovered")

    # Back to 3 within the grace: the same pod (same uid, same host name) returns to discovery.
    await scale(kube, "si", 3, "json")
    await wait_mounted(kube, kubesim, http, "si", all_three)
    pods = await worker_pods(kube, "si")
    assert pods["si-worker-2"]["metadata"]["uid"] == uid
    assert not pods["si-worker-2"]["metadata"].get("deletionTimestamp")
    await eventually(lambda: _none_draining(kube), what="the draining stamp cleared")

    # 3 -> 2 again, this time the grace runs out: the pod is deleted, not before.
    with Terminations(kubesim, clock, "si") as terminations:
        await scale(kube, "si", 2, "scale")
        await wait_mounted(kube, kubesim, http, "si", all_three[:2])
        await settle(kube, operator, "si")
        stamp = draining_since((await worker_pods(kube, "si"))["si-worker-2"])
        assert stamp is not None, "si-worker-2 not draining"
        clock.advance(GRACE - 60)
        await settle(kube, operator, "si")
        assert terminations.at == {}, "deleted before scaleInGracePeriodSeconds"
        clock.advance(60)

        async def deleted() -> bool:
            pod = (await worker_pods(kube, "si")).get("si-worker-2")
            return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

        await eventually(deleted, what="si-worker-2 deleted after its grace")
    waited = terminations.at["si-worker-2"] - stamp
    assert waited >= timedelta(seconds=GRACE), (
        f"deleted {waited} after the scale-in, grace is {GRACE}s"
    )
    assert set(await worker_pods(kube, "si")) >= {"si-worker-0", "si-worker-1"}


async def _none_draining(kube: Kube) -> bool:
    return not await draining(kube, "si")
