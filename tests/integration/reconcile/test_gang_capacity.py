"""Gang scheduling on a cluster that says no (3 nodes of 2 GPUs each), for both gang schedulers:
two static jobs that each need 4 of the 6 GPUs never hold part of them each (one runs, then the
other, both succeed), and an elastic job's group admits it at minReplicas (+ a launcher created at
startup) while the rest of its workers join as GPUs free up."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.nodes import uniform
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from operator_testing import fast_sim_settings

from .harness import (
    NS,
    WITHIN,
    container,
    install_pod_groups,
    mpijob,
    running_operator,
)

GANGS = {
    "scheduler-plugins": resources.SCHEDULER_PLUGINS_POD_GROUP,
    "volcano": resources.VOLCANO_POD_GROUP,
}
ONE_GPU = container("worker", resources={"limits": {"nvidia.com/gpu": "1"}})


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_sim_settings(
        nodes=uniform(3, {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"})
    )


def bound_workers(kubesim: KubeSim, job: str) -> int:
    """Workers of `job` holding a node: bound and not ended."""
    return sum(
        1
        for p in kubesim.cluster.list(builtins.PODS, NS)["items"]
        if p["metadata"]["name"].startswith(f"{job}-worker-")
        and p["spec"].get("nodeName")
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    )


@pytest.mark.parametrize("gang", list(GANGS))
async def test_two_jobs_that_each_need_most_gpus_run_one_after_the_other(
    kubesim: KubeSim, kube: Kube, gang: str
) -> None:
    await install_pod_groups(kube, GANGS[gang])
    seen: dict[str, list[int]] = {"first": [], "second": []}

    def job(name: str) -> dict[str, Any]:
        return mpijob(
            name,
            workers=4,
            worker_container=ONE_GPU,
            launcherCreationPolicy="WaitForWorkersReady",
            launcher_annotations={"kubesim/run-seconds": "0.5"},
            runPolicy={"cleanPodPolicy": "Running"},
        )

    async with running_operator(kubesim, gang_scheduling=gang):
        await kube.create(resources.MPIJOB, job("first"))
        await kube.create(resources.MPIJOB, job("second"))

        async def both_succeeded() -> bool:
            # Re-checked on every change of the cluster: each state of the two gangs is seen.
            done = 0
            for name, counts in seen.items():
                counts.append(bound_workers(kubesim, name))
                status = (await kube.get(resources.MPIJOB, name, NS)).get("status") or {}
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                done += conditions.get("Succeeded") == "True"
            return done == 2

        await eventually(both_succeeded, within=2 * WITHIN, what="both jobs Succeeded")
    for name, counts in seen.items():
        # A gang is bound whole; its workers leave one by one once the job has succeeded.
        assert next(n for n in counts if n) == 4, f"{name} held part of the GPUs: {counts}"


@pytest.mark.parametrize("gang", list(GANGS))
@pytest.mark.parametrize("policy", ["AtStartup", "WaitForWorkersReady"])
async def test_an_elastic_group_starts_at_min_replicas_and_grows(
    kubesim: KubeSim, kube: Kube, gang: str, policy: str
) -> None:
    await install_pod_groups(kube, GANGS[gang])
    blockers = [f"blocker-{i}" for i in range(2)]
    for name in blockers:  # 4 of the 6 GPUs taken by pods of the default scheduler
        await kube.create(
            resources.POD,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "containers": [{**ONE_GPU, "resources": {"limits": {"nvidia.com/gpu": "2"}}}]
                },
            },
        )

    async def blockers_bound() -> bool:
        pods = [await kube.get(resources.POD, name, NS) for name in blockers]
        return all(p["spec"].get("nodeName") for p in pods)

    await eventually(blockers_bound, what="the blockers on two nodes")
    body = mpijob(
        "grow",
        workers=4,
        worker_container=ONE_GPU,
        launcherCreationPolicy=policy,
        elasticPolicy={"minReplicas": 2, "maxReplicas": 4},
    )
    body["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    async with running_operator(kubesim, gang_scheduling=gang):
        await kube.create(resources.MPIJOB, body)

        async def launcher_bound() -> bool:
            pods = kubesim.cluster.list(builtins.PODS, NS)["items"]
            return any(
                p["metadata"]["name"].startswith("grow-launcher-") and p["spec"].get("nodeName")
                for p in pods
            )

        await eventually(launcher_bound, what="the launcher bound with minReplicas workers")
        group = await kube.get(GANGS[gang], "grow", NS)
        assert group["spec"]["minMember"] == (3 if policy == "AtStartup" else 2)
        assert bound_workers(kubesim, "grow") == 2

        await kube.delete(resources.POD, blockers[0], namespace=NS)

        async def all_four() -> bool:
            return bound_workers(kubesim, "grow") == 4

        await eventually(all_four, what="the other two workers joining the running group")
