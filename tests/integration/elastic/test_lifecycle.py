"""An elastic job around its life, against kubesim: out-of-bounds replicas reported once per value
(not on every sync, not again after an operator restart); `status.elastic` telling the truth while
suspended and a resume that brings the same hosts back; and after a below-minReplicas failure, the
launcher Job stopped through its deadline while the MPIJob keeps the below-minReplicas reason."""

from __future__ import annotations

from typing import Any

import aiohttp
from chaoslib.steps import scale

from integration.reconcile.harness import (
    NS,
    WITHIN,
    conditions,
    container,
    events_for,
    get_job,
    mpijob,
    operator_writes,
    quiet,
    running_operator,
    settle,
    wait_condition,
    wait_event,
)
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import elastic_job, elastic_status, host, launcher_pod, wait_mounted, worker_pods

OOB = "ReplicasOutOfBounds"


def horovod_job(name: str, workers: int) -> dict[str, Any]:
    """Elastic by its horovodrun command (bounds 1..2): admission cannot refuse replicas beyond
    them."""
    command = ["horovodrun", "-np", "1", "--min-np", "1", "--max-np", "2"]
    command += ["--host-discovery-script", "/etc/mpi/discover_hosts.sh", "python", "train.py"]
    return mpijob(name, workers=workers, launcher_container=container(command=command))


async def out_of_bounds_events(kube: Kube, name: str) -> dict[str, int]:
    """message -> how many times it was recorded (the Event's aggregated count)."""
    return {
        e["message"]: int(e.get("count") or 1)
        for e in await events_for(kube, name)
        if e.get("reason") == OOB
    }


async def resync(kube: Kube, kubesim: KubeSim, mgr: Manager, name: str, times: int) -> list[str]:
    """Makes the operator reconcile `name` `times` more times (an annotation change each, `settle`);
    returns the operator's writes to ReplicasOutOfBounds Events meanwhile, Event writes included
    (the recorder writes in the background; `settle` waits for it too)."""
    await settle(kube, mgr, name)
    kubesim.control.clear_requests()
    for _ in range(times):
        await settle(kube, mgr, name)
    names = {e["metadata"]["name"] for e in await events_for(kube, name) if e.get("reason") == OOB}
    return [w for w in operator_writes(kubesim) if w.split("/", 1)[-1] in names]


async def test_out_of_bounds_replicas_are_reported_once_per_value_across_restarts(
    kube: Kube, kubesim: KubeSim
) -> None:
    await kube.create(resources.MPIJOB, horovod_job("oob", workers=3))
    async with running_operator(kubesim) as mgr:
        await wait_event(kube, "oob", OOB)
        assert await resync(kube, kubesim, mgr, "oob", 4) == []
        assert await out_of_bounds_events(kube, "oob") == {
            "Worker replicas 3 outside elasticPolicy bounds [1, 2]; running 2": 1
        }
        assert (await elastic_status(kube, "oob"))["desired"] == 2

    async with running_operator(kubesim) as mgr:
        assert await resync(kube, kubesim, mgr, "oob", 2) == []
        assert list((await out_of_bounds_events(kube, "oob")).values()) == [1], (
            "re-reported after restart"
        )

        await scale(kube, "oob", 5, "scale")

        async def reported() -> dict[str, int]:
            return {
                m: n
                for m, n in (await out_of_bounds_events(kube, "oob")).items()
                if "replicas 5" in m
            }

        assert list((await eventually(reported, what="the new value reported")).values()) == [1]
        assert await resync(kube, kubesim, mgr, "oob", 2) == []
        assert sorted((await out_of_bounds_events(kube, "oob")).values()) == [1, 1]


async def test_status_elastic_follows_a_suspend_and_the_resume_brings_the_hosts_back(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager
) -> None:
    await kube.create(
        resources.MPIJOB, elastic_job("sus", workers=2, min_replicas=1, max_replicas=3)
    )
    await wait_condition(kube, "sus", "Running")
    hosts = [host("sus", 0), host("sus", 1)]
    await wait_mounted(kube, kubesim, http, "sus", hosts)

    await kube.patch(
        resources.MPIJOB, "sus", {"spec": {"runPolicy": {"suspend": True}}}, namespace=NS
    )

    async def suspended() -> bool:
        status = await elastic_status(kube, "sus")
        assert (status.get("discovered"), status.get("ready"), status.get("draining")) == (
            0,
            0,
            0,
        ), status
        assert await worker_pods(kube, "sus") == {}, "the suspend deletes the workers"
        cm = await kube.get(resources.CONFIG_MAP, "sus-config", NS)
        assert "sus-worker" not in cm["data"]["discover_hosts.sh"], cm["data"]
        return True

    await eventually(
        suspended, what="status.elastic of a suspended job: nothing discovered, ready or draining"
    )
    assert await launcher_pod(kube, "sus") is None
    assert (await elastic_status(kube, "sus"))["desired"] == 2

    await kube.patch(
        resources.MPIJOB, "sus", {"spec": {"runPolicy": {"suspend": False}}}, namespace=NS
    )
    await wait_mounted(kube, kubesim, http, "sus", hosts)
    await wait_condition(kube, "sus", "Running")

    async def resumed() -> bool:
        status = await elastic_status(kube, "sus")
        assert (status.get("discovered"), status.get("ready"), status.get("replacements")) == (
            2,
            2,
            0,
        ), status
        return True

    await eventually(resumed, what="status.elastic of the resumed job")
    reasons = [e["reason"] for e in await events_for(kube, "sus")]
    assert "WorkerFailed" not in reasons, "the suspend's deletions are no worker failures"


async def test_below_min_failure_stops_the_launcher_and_keeps_its_reason(
    kube: Kube, kubesim: KubeSim, http: aiohttp.ClientSession, operator: Manager
) -> None:
    body = elastic_job("stop", workers=2, min_replicas=2, below_min=1)
    body["spec"]["elasticPolicy"]["maxReplacements"] = 0
    await kube.create(resources.MPIJOB, body)
    await wait_condition(kube, "stop", "Running")
    await wait_mounted(kube, kubesim, http, "stop", [host("stop", 0), host("stop", 1)])

    kubesim.controllers.kubelet.kill("default", "stop-worker-1", exit_code=3)
    failed = conditions(await wait_condition(kube, "stop", "Failed"))["Failed"]
    assert failed["reason"] == "BelowMinReplicas"

    async def launcher_failed() -> dict[str, Any] | None:
        launcher = await kube.get(resources.JOB, "stop-launcher", NS)
        done = conditions(launcher).get("Failed", {})
        return launcher if done.get("status") == "True" else None

    launcher = await eventually(launcher_failed, what="the launcher Job to fail", within=WITHIN)
    assert conditions(launcher)["Failed"]["reason"] == "DeadlineExceeded"
    assert launcher["spec"]["activeDeadlineSeconds"] >= 1
    assert await launcher_pod(kube, "stop") is None, "horovodrun still runs"

    writes = await quiet(kubesim, kube, operator, "stop")
    assert writes == [], f"a stopped job's steady state wrote: {writes}"
    job = await get_job(kube, "stop")
    assert conditions(job)["Failed"] == failed, (
        "the launcher's failure replaced the below-min reason"
    )
    assert "stop-worker-1" in failed["message"], failed
    assert "exit code 3" in failed["message"], failed
    reasons = [e["reason"] for e in await events_for(kube, "stop")]
    assert reasons.count("DeadlineExceeded") == 0, reasons
    assert reasons.count("LauncherStopped") == 1, reasons
