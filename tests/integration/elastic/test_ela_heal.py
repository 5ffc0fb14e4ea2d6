"""Self-healing: a killed or evicted worker leaves discovery at once and comes back under a fresh host name
(Horovod blacklists the old one); without a replacement budget, ready workers below minReplicas fail the
job after `belowMinTimeoutSeconds` with a condition naming the worker and its exit code."""

from __future__ import annotations

import time

import aiohttp
import pytest
from ela_harness import (
    elastic_job,
    host,
    http,
    kubesim_settings,
    wait_mounted,
    worker_pods,
)

from integration.reconcile.rc_harness import (
    conditions,
    eventually,
    get_job,
    kube,
    operator,
    wait_condition,
    wait_event,
)
from kubesim.app import KubeSim
from mpi_operator.controller.manager import Manager
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

__all__ = ["http", "kube", "kubesim_settings", "operator"]


@pytest.mark.parametrize("fault", ["kill", "evict"], ids=["killed", "evicted"])
async def test_a_lost_worker_leaves_discovery_and_rejoins_under_a_new_name(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager, fault: str
) -> None:
    await kube.create(resources.MPIJOB, elastic_job("heal", workers=3, min_replicas=2, settle=1))
    await wait_condition(kube, "heal", "Running")
    await wait_mounted(kube, kubesim, http, "heal", [host("heal", i) for i in range(3)])
    old_uid = (await worker_pods(kube, "heal"))["heal-worker-1"]["metadata"]["uid"]

    lost = time.monotonic()
    if fault == "kill":
        kubesim.controllers.kubelet.kill("default", "heal-worker-1", exit_code=137)
    else:
        kubesim.controllers.kubelet.evict("default", "heal-worker-1")
    await wait_mounted(kube, kubesim, http, "heal", [host("heal", 0), host("heal", 2)], limit=3)
    assert time.monotonic() - lost < 2, "a lost worker must leave the launcher's view at once"

    await wait_mounted(
        kube, kubesim, http, "heal", [host("heal", 0), host("heal", 1, 1), host("heal", 2)], limit=10
    )
    pod = (await worker_pods(kube, "heal"))["heal-worker-1"]
    assert pod["metadata"]["uid"] != old_uid
    assert pod["spec"]["hostname"] == "heal-worker-1-r1"
    assert pod["metadata"]["annotations"]["mpi-operator.kubeflow.org/incarnation"] == "1"
    job = await get_job(kube, "heal")
    assert not conditions(job).get("Failed"), "an elastic job survives a lost worker"
    assert job["status"]["elastic"]["replacements"] == 1
    registry = operator.metrics.registry
    assert registry.get_sample_value("mpi_operator_elastic_worker_replacements_total") == 1


async def test_below_min_replicas_fails_the_job_after_the_timeout(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager
) -> None:
    body = elastic_job("low", workers=2, min_replicas=2, below_min=2)
    body["spec"]["elasticPolicy"]["maxReplacements"] = 0
    await kube.create(resources.MPIJOB, body)
    await wait_condition(kube, "low", "Running")
    await wait_mounted(kube, kubesim, http, "low", [host("low", 0), host("low", 1)])

    killed = time.monotonic()
    kubesim.controllers.kubelet.kill("default", "low-worker-1", exit_code=3)
    await wait_event(kube, "low", "BelowMinReplicas", limit=3)
    assert not conditions(await get_job(kube, "low")).get("Failed"), "failed before the timeout"
    job = await wait_condition(kube, "low", "Failed", limit=8)
    assert time.monotonic() - killed >= 2 - 0.5
    failed = conditions(job)["Failed"]
    assert failed["reason"] == "BelowMinReplicas"
    assert "low-worker-1" in failed["message"], failed
    assert "exit code 3" in failed["message"], failed
    assert job["status"].get("completionTime")

    async def still_failed() -> bool:
        return bool(conditions(await get_job(kube, "low")).get("Failed", {}).get("status") == "True")

    await eventually(still_failed, "the Failed condition to stay")
