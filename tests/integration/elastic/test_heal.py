"""Self-healing: a killed or evicted worker leaves discovery at once and comes back under a fresh
host name (Horovod blacklists the old one) once `settleSeconds` have passed; without a replacement
budget, ready workers below minReplicas fail the job after `belowMinTimeoutSeconds` with a condition
naming the worker and its exit code. Those durations are ten minutes on the operator's
`SteppedClock`: "at once" means without the clock moving, and the failure's time on that clock shows
it came no earlier than the timeout."""

from __future__ import annotations

from datetime import datetime, timedelta

import aiohttp
import pytest
from chaoslib.invariants import is_ready

from integration.reconcile.harness import conditions, get_job, settle, wait_condition, wait_event
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock

from .harness import elastic_job, host, wait_mounted, worker_pods

PACING = 600
"""settleSeconds and belowMinTimeoutSeconds: far beyond the test's own duration."""


@pytest.mark.parametrize("fault", ["kill", "evict"], ids=["killed", "evicted"])
async def test_a_lost_worker_leaves_discovery_and_rejoins_under_a_new_name(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
    fault: str,
) -> None:
    await kube.create(
        resources.MPIJOB, elastic_job("heal", workers=3, min_replicas=2, settle=PACING)
    )
    await wait_condition(kube, "heal", "Running")

    async def all_ready() -> bool:
        pods = await worker_pods(kube, "heal")
        return len(pods) == 3 and all(is_ready(p) for p in pods.values())

    await eventually(all_ready, what="three Ready workers")
    clock.advance(PACING)  # the first hosts are published one change at a time, settleSeconds apart
    await wait_mounted(kube, kubesim, http, "heal", [host("heal", i) for i in range(3)])
    old_uid = (await worker_pods(kube, "heal"))["heal-worker-1"]["metadata"]["uid"]

    if fault == "kill":
        kubesim.controllers.kubelet.kill("default", "heal-worker-1", exit_code=137)
    else:
        kubesim.controllers.kubelet.evict("default", "heal-worker-1")
    # At once: whatever the settle clock says, which is still at the start of its ten minutes.
    await wait_mounted(kube, kubesim, http, "heal", [host("heal", 0), host("heal", 2)])

    async def replaced() -> bool:
        pod = (await worker_pods(kube, "heal")).get("heal-worker-1")
        return pod is not None and pod["metadata"]["uid"] != old_uid and is_ready(pod)

    await eventually(replaced, what="a Ready replacement of heal-worker-1")
    await settle(kube, operator, "heal")
    await wait_mounted(
        kube, kubesim, http, "heal", [host("heal", 0), host("heal", 2)]
    )  # still settling

    clock.advance(PACING)
    await wait_mounted(
        kube, kubesim, http, "heal", [host("heal", 0), host("heal", 1, 1), host("heal", 2)]
    )
    pod = (await worker_pods(kube, "heal"))["heal-worker-1"]
    assert pod["metadata"]["uid"] != old_uid
    assert pod["spec"]["hostname"] == "heal-worker-1-r1"
    assert pod["metadata"]["annotations"]["mpi-operator.kubeflow.org/incarnation"] == "1"
    job = await get_job(kube, "heal")
    assert not conditions(job).get("Failed"), "an elastic job survives a lost worker"
    # A killed program uses up a replacement; an eviction is the cluster's doing and does not.
    elastic = job["status"]["elastic"]
    expected = (1, 0) if fault == "kill" else (0, 1)
    assert (elastic["replacements"], elastic["disruptions"]) == expected
    registry = operator.metrics.registry
    assert registry.get_sample_value("mpi_operator_elastic_worker_replacements_total") == 1


async def test_below_min_replicas_fails_the_job_after_the_timeout(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
) -> None:
    body = elastic_job("low", workers=2, min_replicas=2, below_min=PACING)
    body["spec"]["elasticPolicy"]["maxReplacements"] = 0
    await kube.create(resources.MPIJOB, body)
    await wait_condition(kube, "low", "Running")
    await wait_mounted(kube, kubesim, http, "low", [host("low", 0), host("low", 1)])

    killed = clock.utc_now()
    kubesim.controllers.kubelet.kill("default", "low-worker-1", exit_code=3)
    await wait_event(kube, "low", "BelowMinReplicas")
    clock.advance(PACING - 60)
    await settle(kube, operator, "low")
    assert not conditions(await get_job(kube, "low")).get("Failed"), "failed before the timeout"

    clock.advance(60)
    job = await wait_condition(kube, "low", "Failed")
    failed = conditions(job)["Failed"]
    failed_at = datetime.fromisoformat(failed["lastTransitionTime"].replace("Z", "+00:00"))
    # lastTransitionTime has whole seconds: one second of truncation.
    assert failed_at - killed >= timedelta(seconds=PACING - 1), (
        f"failed {failed_at - killed} after the kill"
    )
    assert failed["reason"] == "BelowMinReplicas"
    assert "low-worker-1" in failed["message"], failed
    assert "exit code 3" in failed["message"], failed
    assert job["status"].get("completionTime")

    await settle(kube, operator, "low")
    assert conditions(await get_job(kube, "low"))["Failed"]["status"] == "True", (
        "the Failed condition left"
    )
