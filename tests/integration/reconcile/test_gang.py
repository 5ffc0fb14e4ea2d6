"""Gang scheduling through the API (upstream integration `TestMPIJobWithSchedulerPlugins`,
`TestMPIJobWithVolcanoScheduler`): with `--gang-scheduling` the PodGroup is created before the
workers, the pods name the gang scheduler and their group, schedulingPolicy changes reach the
PodGroup, and a gang runs under either launcher creation policy. The PodGroup CRDs are minimal
stand-ins (free-form spec), as the operator only writes them."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.runtime import handlers

from .harness import (
    NS,
    OPERATOR_AGENT,
    container,
    install_pod_groups,
    list_names,
    mpijob,
    running_operator,
)

GANGS: dict[str, tuple[Resource, str]] = {
    "scheduler-plugins": (resources.SCHEDULER_PLUGINS_POD_GROUP, "scheduler-plugins-scheduler"),
    "volcano": (resources.VOLCANO_POD_GROUP, "volcano"),
}


@pytest.mark.parametrize("gang", list(GANGS))
async def test_pod_group_created_first_and_kept_in_sync(
    kubesim: KubeSim, kube: Kube, gang: str
) -> None:
    resource, scheduler = GANGS[gang]
    await install_pod_groups(kube, resource)
    policy = {"schedulingPolicy": {"scheduleTimeoutSeconds": 900, "queue": "q1"}}
    async with running_operator(kubesim, gang_scheduling=gang):
        await kube.create(resources.MPIJOB, mpijob("pi", runPolicy=policy))

        async def pod_group() -> dict[str, Any] | None:
            try:
                return await kube.get(resource, "pi", NS)
            except Exception:
                return None

        group = await eventually(pod_group, what="the PodGroup")
        assert group["spec"]["minMember"] == 3

        async def two_workers() -> bool:
            return (
                len(await list_names(kube, resources.POD, "mpi_job_name=pi,mpi_role_type=worker"))
                == 2
            )

        await eventually(two_workers, what="two workers")
        # In the request record, once both exist: the PodGroup was created before any pod.
        creates = [
            r.resource
            for r in kubesim.control.recorded(verb="create", user_agent=OPERATOR_AGENT)
            if r.resource != "events"
        ]
        assert creates.index("podgroups") < creates.index("pods")
        worker = await kube.get(resources.POD, "pi-worker-0", NS)
        assert worker["spec"]["schedulerName"] == scheduler
        if gang == "volcano":
            assert worker["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pi"
            assert group["spec"]["queue"] == "q1"
        else:
            assert worker["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "pi"
            assert group["spec"]["scheduleTimeoutSeconds"] == 900

        change = {
            "spec": {
                "runPolicy": {"schedulingPolicy": {"scheduleTimeoutSeconds": 10, "minAvailable": 2}}
            }
        }
        await kube.patch(resources.MPIJOB, "pi", change, namespace=NS)

        async def updated() -> bool:
            spec = (await kube.get(resource, "pi", NS))["spec"]
            return spec["minMember"] == 2 and (
                gang == "volcano" or spec["scheduleTimeoutSeconds"] == 10
            )

        await eventually(updated, what="the schedulingPolicy change on the PodGroup")


@pytest.mark.parametrize("with_class", [True, False], ids=["class-served", "no-such-class"])
async def test_pod_group_min_resources_follow_the_priority_classes_kubesim_serves(
    kubesim: KubeSim, kube: Kube, with_class: bool
) -> None:
    """Upstream `calculatePGMinResources`: with minAvailable below the pod count, the replica type
    of lower priority gives way. The workers' PriorityClass (value read from the API) outranks the
    launcher, so all 3 workers count and the launcher is cut to 1; without the class both are
    priority 0 and the workers give way instead."""
    resource, _ = GANGS["volcano"]
    await install_pod_groups(kube, resource)
    if with_class:
        high = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
        }
        await kube.create(handlers.PRIORITY_CLASS, {**high, "value": 1000})
    job = mpijob(
        "prio",
        workers=3,
        runPolicy={"schedulingPolicy": {"minAvailable": 2}},
        launcher_container=container("launcher", resources={"requests": {"cpu": "1"}}),
        worker_container=container("worker", resources={"requests": {"cpu": "2"}}),
    )
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "high"
    async with running_operator(kubesim, gang_scheduling="volcano"):
        await kube.create(resources.MPIJOB, job)

        async def min_resources() -> dict[str, Any] | None:
            try:
                return (await kube.get(resource, "prio", NS))["spec"].get("minResources")
            except Exception:
                return None

        got = await eventually(min_resources, what="the PodGroup's minResources")
    assert got == {"cpu": "7" if with_class else "3"}, got


@pytest.mark.parametrize("gang", list(GANGS))
@pytest.mark.parametrize("policy", ["AtStartup", "WaitForWorkersReady"])
async def test_the_default_group_runs_under_either_launcher_policy(
    kubesim: KubeSim, kube: Kube, gang: str, policy: str
) -> None:
    """kubesim binds a gang all or nothing, as the real gang schedulers do. A launcher created at
    startup completes minMember = workers + 1 and all three go together; one that waits for the
    workers to be Ready (`WaitForWorkersReady`) is not counted (minMember = workers), so the
    workers go first and the launcher joins the running group, instead of the workers waiting
    for it while it waits for them (upstream's minMember = workers + 1)."""
    resource, _ = GANGS[gang]
    await install_pod_groups(kube, resource)
    async with running_operator(kubesim, gang_scheduling=gang):
        await kube.create(resources.MPIJOB, mpijob("gang", launcherCreationPolicy=policy))

        async def all_bound() -> bool:
            listed = kubesim.cluster.list(builtins.PODS, NS)["items"]
            found = [p for p in listed if p["metadata"]["name"].startswith("gang-")]
            return len(found) == 3 and all(p["spec"].get("nodeName") for p in found)

        await eventually(all_bound, what="the launcher and both workers bound")
        group = await kube.get(resource, "gang", NS)
    assert group["spec"]["minMember"] == (3 if policy == "AtStartup" else 2)
