"""The classic `kubeflow.org/v1` elastic Horovod manifest (no elasticPolicy, `horovodrun -np 2
--min-np 1 --max-np 3 --host-discovery-script ...`) is elastic: bounds inferred from horovodrun, the
launcher env carries them, it scales within them, and replicas beyond them (admission cannot know
inferred bounds) are not acted on but reported. Its pacing is the default (settleSeconds 5), which
the test skips by moving the operator's `SteppedClock`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from chaoslib.invariants import is_ready
from chaoslib.steps import scale

from integration.reconcile.harness import FAST_PODS, NS, get_job, settle, wait_condition, wait_event
from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager
from operator_testing import SteppedClock

from .harness import elastic_status, host, wait_mounted, worker_pods

MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "valid" / "v1-horovod-elastic.yaml"
NAME = "tensorflow-mnist-elastic"
DEFAULT_SETTLE = 5
"""settleSeconds when elasticPolicy does not set it (docs/elastic.md)."""


def v1_manifest() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    body["metadata"]["namespace"] = NS
    for spec in body["spec"]["mpiReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["annotations"] = dict(FAST_PODS)
    return body


async def ready_workers(kube: Kube, count: int) -> None:
    async def check() -> bool:
        pods = await worker_pods(kube, NAME)
        return len(pods) == count and all(is_ready(p) for p in pods.values())

    await eventually(check, what=f"{count} Ready workers")


def env_of(launcher_job: dict[str, Any]) -> dict[str, str]:
    container = launcher_job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


async def test_v1_horovodrun_manifest_is_elastic_with_inferred_bounds(
    kube: Kube,
    kubesim: KubeSim,
    http: aiohttp.ClientSession,
    operator: Manager,
    clock: SteppedClock,
) -> None:
    await kube.create(dataclasses.replace(resources.MPIJOB, version="v1"), v1_manifest())
    await ready_workers(kube, 2)
    clock.advance(DEFAULT_SETTLE)  # hosts that turned Ready apart are published settleSeconds apart
    await wait_mounted(kube, kubesim, http, NAME, [host(NAME, 0), host(NAME, 1)])
    launcher = await kube.get(resources.JOB, f"{NAME}-launcher", NS)
    env = env_of(launcher)
    assert (env["MPIJOB_MIN_NP"], env["MPIJOB_MAX_NP"]) == ("1", "3"), env
    assert env["MPIJOB_DISCOVERY_SCRIPT"] == "/etc/mpi/discover_hosts.sh"

    async def bounds() -> bool:
        status = await elastic_status(kube, NAME)
        assert (status.get("minReplicas"), status.get("maxReplicas")) == (1, 3), status
        return True

    await eventually(bounds, what="status.elastic with the inferred bounds 1..3")

    await scale(kube, NAME, 3, "merge")
    await ready_workers(kube, 3)
    clock.advance(DEFAULT_SETTLE)
    await wait_mounted(kube, kubesim, http, NAME, [host(NAME, i) for i in range(3)])

    # 5 gets past admission (the bounds are inferred, CEL cannot see them); the operator keeps 3.
    await scale(kube, NAME, 5, "scale")
    event = await wait_event(kube, NAME, "ReplicasOutOfBounds")
    assert "replicas 5 outside" in event["message"], event["message"]
    assert "[1, 3]" in event["message"], event["message"]
    await settle(kube, operator, NAME)
    assert sorted(await worker_pods(kube, NAME)) == [f"{NAME}-worker-{i}" for i in range(3)]
    job = await get_job(kube, NAME)
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 5
    assert job["status"]["elastic"]["desired"] == 3
    assert job["status"]["observedGeneration"] == job["metadata"]["generation"]
    await wait_condition(kube, NAME, "Running")
