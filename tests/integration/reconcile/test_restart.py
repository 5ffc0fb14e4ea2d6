"""Restarting the operator (stop the Manager, start a new one) loses nothing and duplicates nothing:
all state lives in the API and child names are deterministic. A converged job gets no writes at all
from the new process; a job whose launcher could not be created (upstream's `launcher pod created
failed` Warning) is finished by the successor, which creates only what is missing."""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

from .harness import (
    OPERATOR_AGENT,
    list_names,
    mpijob,
    operator_writes,
    quiet,
    running_operator,
    settle,
    wait_condition,
    wait_event,
)


async def child_names(kube: Kube) -> dict[str, list[str]]:
    return {
        "services": await list_names(kube, resources.SERVICE),
        "configmaps": await list_names(kube, resources.CONFIG_MAP),
        "secrets": await list_names(kube, resources.SECRET),
        "pods": await list_names(kube, resources.POD),
        "jobs": await list_names(kube, resources.JOB),
    }


async def test_restart_of_a_converged_job_writes_nothing(kubesim: KubeSim, kube: Kube) -> None:
    await kube.create(resources.MPIJOB, mpijob("pi"))
    async with running_operator(kubesim) as mgr:
        await wait_condition(kube, "pi", "Running")

        async def workers_ready() -> bool:  # the last change: Ready workers enter discover_hosts.sh
            job = await kube.get(resources.MPIJOB, "pi", "default")
            return bool(job["status"]["replicaStatuses"]["Worker"].get("ready") == 2)

        await eventually(workers_ready, what="Worker.ready == 2")
        await settle(kube, mgr, "pi")
    before = await child_names(kube)
    secret = await kube.get(resources.SECRET, "pi-ssh", "default")
    status = (await kube.get(resources.MPIJOB, "pi", "default"))["status"]

    kubesim.control.clear_requests()
    async with running_operator(kubesim) as mgr:
        registry = mgr.metrics.registry

        async def reconciled() -> bool:
            return (
                registry.get_sample_value("mpi_operator_reconcile_total", {"result": "success"})
                or 0
            ) >= 1

        await eventually(reconciled, what="the new operator's first reconcile")
        await settle(kube, mgr, "pi")
        writes = operator_writes(kubesim)
    assert writes == [], f"the restarted operator wrote: {writes}"
    assert await child_names(kube) == before
    # The SSH keys are not regenerated, the status not rewritten.
    assert (await kube.get(resources.SECRET, "pi-ssh", "default"))["data"] == secret["data"]
    assert (await kube.get(resources.MPIJOB, "pi", "default"))["status"] == status


async def test_restart_completes_a_half_created_job_without_duplicates(
    kubesim: KubeSim, kube: Kube
) -> None:
    rule = kubesim.control.inject_error(
        403,
        method="POST",
        path=r"/apis/batch/v1/namespaces/default/jobs$",
        count=None,
        message="quota",
    )
    await kube.create(resources.MPIJOB, mpijob("pi"))
    async with running_operator(kubesim):
        event = await wait_event(kube, "pi", "MPIJobFailed")
        assert event["type"] == "Warning"
        assert event["message"].startswith("launcher pod created failed: ")
        assert rule.hits >= 1
    half = await child_names(kube)
    assert half["jobs"] == []
    assert half["pods"] == ["pi-worker-0", "pi-worker-1"]
    kubesim.control.clear_faults()
    kubesim.control.clear_requests()

    async with running_operator(kubesim):
        await wait_condition(kube, "pi", "Running")
        creates = [
            r.resource
            for r in kubesim.control.recorded(verb="create", user_agent=OPERATOR_AGENT)
            if r.resource != "events"
        ]
    assert creates == ["jobs"]
    after = await child_names(kube)
    assert after["jobs"] == ["pi-launcher"]
    assert {k: v for k, v in after.items() if k != "pods"} == {
        **{k: v for k, v in half.items() if k != "pods"},
        "jobs": ["pi-launcher"],
    }
    assert [p for p in after["pods"] if p.startswith("pi-worker")] == ["pi-worker-0", "pi-worker-1"]


async def test_children_of_an_older_version_without_the_watch_label_are_relabelled(
    kubesim: KubeSim, kube: Kube
) -> None:
    job = await kube.create(resources.MPIJOB, mpijob("pi"))
    owner = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # As upstream made it: only `app: pi`, invisible to the label-filtered informer.
    old = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "pi-config",
            "namespace": "default",
            "labels": {"app": "pi"},
            "ownerReferences": [owner],
        },
        "data": {"hostfile": "stale\n", "discover_hosts.sh": "#!/bin/sh\n"},
    }
    await kube.create(resources.CONFIG_MAP, old)
    async with running_operator(kubesim) as mgr:
        await wait_condition(kube, "pi", "Running")

        async def relabelled_and_updated() -> bool:
            cm = await kube.get(resources.CONFIG_MAP, "pi-config", "default")
            labels = cm["metadata"]["labels"]
            return labels.get(
                "training.kubeflow.org/operator-name"
            ) == "mpi-operator" and "stale" not in str(cm["data"])

        await eventually(
            relabelled_and_updated, what="the old ConfigMap labelled, then kept up to date"
        )
        assert await list_names(kube, resources.CONFIG_MAP) == ["pi-config"]

        async def converged() -> bool:
            cm = await kube.get(resources.CONFIG_MAP, "pi-config", "default")
            return cm["data"]["discover_hosts.sh"].count("pi-worker-") == 2

        await eventually(converged, what="both Ready workers in discover_hosts.sh")
        writes = await quiet(kubesim, kube, mgr, "pi")
    assert writes == [], f"steady state after relabelling wrote: {writes}"
