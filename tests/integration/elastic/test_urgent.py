"""A lost worker leaves discovery ahead of a backlog: the pod event enqueues its job at the front of
the work queue, and the script write and launcher touch take their API tokens on credit, so a busy
operator (slow client rate, one reconcile at a time, other jobs waiting) drops the host while the
other jobs' syncs are still waiting: an order, not a duration, so a slow machine cannot make it pass
or fail."""

from __future__ import annotations

import aiohttp

from integration.reconcile.harness import mpijob, running_operator
from kubesim.app import KubeSim
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

from .harness import elastic_job, host, wait_mounted

QPS = 4
BACKLOG_JOBS = 6


async def test_a_lost_host_leaves_discovery_ahead_of_other_jobs_syncs(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession
) -> None:
    async with running_operator(kubesim, qps=QPS, burst=QPS, workers=1) as mgr:
        await kube.create(resources.MPIJOB, elastic_job("hot", workers=3, min_replicas=1))
        await wait_mounted(kube, kubesim, http, "hot", [host("hot", i) for i in range(3)])
        # About 7 writes per new job at 4 requests/s, one job at a time: a backlog of ~10 s.
        for i in range(BACKLOG_JOBS):
            await kube.create(resources.MPIJOB, mpijob(f"bulk-{i}", workers=2))
        kubesim.controllers.kubelet.kill("default", "hot-worker-1", exit_code=137)
        await wait_mounted(kube, kubesim, http, "hot", [host("hot", 0), host("hot", 2)])
        backlog = len(mgr.queue)
        # with the exit's second request: do not drain the backlog at 4 requests/s
        mgr.request_stop()
    assert backlog > 0, "the other jobs' syncs were still waiting: the lost host went ahead of them"
