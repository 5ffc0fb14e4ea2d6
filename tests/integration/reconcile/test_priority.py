"""`schedulingPolicy.priorityClass` through the API: it reaches the worker and launcher pods that
name no class of their own (kubesim's Priority admission resolves it into `spec.priority`, which the
scheduler ranks and preempts by), a template's own class wins for its pods, and the Volcano
PodGroup carries it too. A class that does not exist is the API server's refusal, told in an
event."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime import handlers
from mpi_operator.runtime.manager import Manager

from .harness import NS, install_pod_groups, mpijob, pods_of, running_operator, wait_event


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


@pytest.mark.parametrize("gang", [None, "volcano"], ids=["no-gang", "volcano"])
@pytest.mark.parametrize("launcher_class", [None, "low"], ids=["launcher-plain", "launcher-own"])
async def test_the_policys_class_reaches_the_pods_and_the_pod_group(
    kubesim: KubeSim, kube: Kube, gang: str | None, launcher_class: str | None
) -> None:
    await kube.create(handlers.PRIORITY_CLASS, priority_class("high", 1000))
    await kube.create(handlers.PRIORITY_CLASS, priority_class("low", 10))
    if gang is not None:
        await install_pod_groups(kube, resources.VOLCANO_POD_GROUP)
    body = mpijob("prio", runPolicy={"schedulingPolicy": {"priorityClass": "high"}})
    if launcher_class is not None:
        launcher = body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        launcher["priorityClassName"] = launcher_class
    async with running_operator(kubesim, gang_scheduling=gang):
        await kube.create(resources.MPIJOB, body)

        async def pods() -> list[dict[str, Any]] | None:
            found = [
                *await pods_of(kube, "prio", "worker"),
                *await pods_of(kube, "prio", "launcher"),
            ]
            return found if len(found) == 3 else None

        found = await eventually(pods, what="two workers and the launcher's pod")
        group = await kube.get(resources.VOLCANO_POD_GROUP, "prio", NS) if gang else None
    by_role = {
        (p["metadata"]["labels"]["training.kubeflow.org/job-role"], p["metadata"]["name"]): p
        for p in found
    }
    for (role, name), pod in by_role.items():
        want = launcher_class if role == "launcher" and launcher_class else "high"
        assert pod["spec"]["priorityClassName"] == want, name
        assert pod["spec"]["priority"] == (1000 if want == "high" else 10), name
    if group is not None:
        assert group["spec"]["priorityClassName"] == "high"


async def test_a_class_that_does_not_exist_is_told_in_an_event(
    kubesim: KubeSim, kube: Kube, operator: Manager
) -> None:
    body = mpijob("typo", runPolicy={"schedulingPolicy": {"priorityClass": "hihg"}})
    await kube.create(resources.MPIJOB, body)
    event = await wait_event(kube, "typo", "MPIJobFailed")
    assert event["type"] == "Warning"
    assert "no PriorityClass with name hihg was found" in event["message"]
    assert await pods_of(kube, "typo", "worker") == []
