"""Legacy manifests (kubeflow.org/v1 and v1alpha1, stored through the CRD's superset schema) are
reconciled like their canonical form, with one `LegacyFieldsMapped` event per generation naming the
canonical fields; v1alpha1 `gpus: 16` with `--gpus-per-node 8` becomes 2 workers with 8 GPUs
each."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource

from .harness import (
    NS,
    condition_true,
    events_for,
    get_job,
    list_names,
    pods_of,
    running_operator,
    settle,
    wait_condition,
    wait_event,
)

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "valid"
FAST = {"kubesim/start-seconds": "0.1", "kubesim/ready-seconds": "0.1"}


def served(body: dict[str, Any]) -> Resource:
    """The endpoint of the manifest's own version (a v1alpha1 body cannot be POSTed to v2beta1)."""
    version = body["apiVersion"].split("/")[1]
    return dataclasses.replace(resources.MPIJOB, version=version)


def manifest(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((MANIFESTS / name).read_text())
    assert isinstance(doc, dict)
    doc["metadata"]["namespace"] = NS
    return doc


async def test_v1alpha1_gpus_split_by_gpus_per_node(kubesim: KubeSim, kube: Kube) -> None:
    body = manifest("v1alpha1-gpus.yaml")
    body["spec"]["template"]["metadata"] = {"annotations": FAST}
    name = body["metadata"]["name"]
    async with running_operator(kubesim, gpus_per_node=8):
        await kube.create(served(body), body)
        event = await wait_event(kube, name, "LegacyFieldsMapped")
        assert event["type"] == "Normal"
        assert "spec.gpus: 16 -> spec.mpiReplicaSpecs.Worker.replicas: 2" in event["message"]

        async def two_workers() -> list[dict[str, Any]] | None:
            pods = await pods_of(kube, name, "worker")
            return pods if len(pods) == 2 else None

        workers = await eventually(two_workers, what="two workers")
        for pod in workers:
            assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        config = await kube.get(resources.CONFIG_MAP, f"{name}-config", NS)
        assert config["data"]["hostfile"].count("slots=8") == 2

        async def launcher() -> dict[str, Any] | None:
            items, _ = await kube.list(resources.JOB, NS)
            return items[0] if items else None

        # WaitForWorkersReady (our default): the launcher follows once both workers are Ready.
        job = await eventually(launcher, what="the launcher Job")
        assert job["spec"]["backoffLimit"] == 2
        assert await list_names(
            kube, resources.POD, f"mpi_job_name={name},mpi_role_type=worker"
        ) == [
            f"{name}-worker-0",
            f"{name}-worker-1",
        ]


async def test_v1_job_runs_like_canonical_with_one_event_per_generation(
    kubesim: KubeSim, kube: Kube
) -> None:
    body = manifest("v1-horovod-elastic.yaml")
    for role in ("Launcher", "Worker"):
        body["spec"]["mpiReplicaSpecs"][role]["template"]["metadata"] = {"annotations": FAST}
    body["spec"]["cleanPodPolicy"] = "All"
    name = body["metadata"]["name"]
    async with running_operator(kubesim):
        await kube.create(served(body), body)
        event = await wait_event(kube, name, "LegacyFieldsMapped")
        assert "spec.cleanPodPolicy: All -> spec.runPolicy.cleanPodPolicy: All" in event["message"]
        await wait_condition(kube, name, "Running")
        assert len(await pods_of(kube, name, "worker")) == 2

    # Restart: the generation was already reported, so no second event.
    async with running_operator(kubesim) as mgr:
        await settle(kube, mgr, name)  # a reconcile by the new operator, its Event writes included
        events = [e for e in await events_for(kube, name) if e["reason"] == "LegacyFieldsMapped"]
        assert [e.get("count", 1) for e in events] == [1]
        assert condition_true(await get_job(kube, name), "Running")
