"""Shared helpers of the elastic reconciler tests (a helper module, not a test module).

Reuses the reconciler suite's helpers (`tests/integration/reconcile/harness.py`: the real Manager
against kubesim over HTTP) and adds elastic manifests and the launcher's *mounted*
`discover_hosts.sh` read through kubesim's file endpoint (`GET
/kubesim/v1/namespaces/{ns}/pods/{pod}/files/etc/mpi/discover_hosts.sh`); scaling through each path
a user has (`scale`) and `is_ready` are the chaos runs' (`bench/chaoslib`), imported from there.
This tier's kubesim (its conftest.py) syncs volumes only every `VOLUME_SYNC_SECONDS`, far beyond any
wait of a test: a mounted script that changes during a test proves the operator's launcher touch,
since nothing else refreshes it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from integration.reconcile.harness import NS, WITHIN, get_job, mpijob
from kubesim.app import KubeSim
from kubesim.cluster import EventType
from kubesim.controllers import resource_type
from kubesim.registry import ResourceType
from kubesim.testing import eventually
from mpi_discovery import hostfile
from mpi_operator.elastic import DRAINING_ANNOTATION
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from operator_testing import SteppedClock, stop_process

VOLUME_SYNC_SECONDS = 3600.0
"""kubesim's periodic volume sync in this tier: longer than any test may run (pytest-timeout: 120
s)."""
SCRIPT = "etc/mpi/discover_hosts.sh"
JOB_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"


def elastic_job(
    name: str,
    *,
    workers: int = 2,
    min_replicas: int = 1,
    max_replicas: int = 3,
    grace: int = 2,
    settle: int = 0,
    below_min: int = 300,
    **spec: Any,
) -> dict[str, Any]:
    """A v2beta1 elastic MPIJob with short pacing values; workers never restart in place."""
    body = mpijob(
        name,
        workers=workers,
        elasticPolicy={
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "scaleInGracePeriodSeconds": grace,
            "settleSeconds": settle,
            "belowMinTimeoutSeconds": below_min,
        },
        **spec,
    )
    body["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    return body


def host(job: str, index: int, incarnation: int = 0) -> str:
    """The FQDN `discover_hosts.sh` prints for a worker incarnation (default cluster domain)."""
    suffix = f"-r{incarnation}" if incarnation else ""
    return f"{job}-worker-{index}{suffix}.{job}.{NS}.svc"


async def launcher_pod(kube: Kube, job: str) -> dict[str, Any] | None:
    """The live launcher pod of `job`, if any."""
    items, _ = await kube.list(
        resources.POD,
        NS,
        label_selector=f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher",
    )
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return live[0] if live else None


async def mounted_script(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, job: str
) -> str | None:
    """`discover_hosts.sh` as the launcher pod's kubelet has mounted it now (None: no launcher
    yet)."""
    pod = await launcher_pod(kube, job)
    if pod is None:
        return None
    url = f"{sim.url}/kubesim/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/files/{SCRIPT}"
    async with http.get(url) as response:
        return await response.text() if response.status == 200 else None


async def mounted_hosts(
    kube: Kube, sim: KubeSim, http: aiohttp.ClientSession, job: str
) -> list[tuple[str, int]] | None:
    """The hosts the launcher's mounted script prints (strictly parsed), None without a launcher."""
    script = await mounted_script(kube, sim, http, job)
    return hostfile.parse_discover_hosts(script) if script is not None else None


async def wait_mounted(
    kube: Kube,
    sim: KubeSim,
    http: aiohttp.ClientSession,
    job: str,
    want: list[str],
    within: float = WITHIN,
) -> None:
    """Waits until the launcher's mounted script lists exactly `want` (in order); `within` stays far
    below `VOLUME_SYNC_SECONDS`, so only the operator's launcher touch can have refreshed the
    file."""
    assert within < VOLUME_SYNC_SECONDS / 10

    async def check() -> bool:
        hosts = await mounted_hosts(kube, sim, http, job)
        assert hosts is not None, "no launcher pod yet"
        assert [h for h, _ in hosts] == want, f"mounted hosts {hosts}"
        return True

    await eventually(
        check, within=within, what=f"the launcher's mounted discover_hosts.sh to list {want}"
    )


async def worker_pods(kube: Kube, job: str) -> dict[str, dict[str, Any]]:
    items, _ = await kube.list(
        resources.POD,
        NS,
        label_selector=f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=worker",
    )
    return {p["metadata"]["name"]: p for p in items}


async def elastic_status(kube: Kube, job: str) -> dict[str, Any]:
    return dict(((await get_job(kube, job)).get("status") or {}).get("elastic") or {})


def draining_since(pod: dict[str, Any]) -> datetime | None:
    """The drain stamp the operator put on a worker pod (its clock's time), None when not
    draining."""
    stamp = (pod["metadata"].get("annotations") or {}).get(DRAINING_ANNOTATION)
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


class Terminations:
    """When, on the operator's clock, each worker pod of a job started terminating (pod name ->
    time).

    Recorded from inside kubesim's commit (a cluster listener), so the time is that of the deletion
    itself, not of a later poll; a context manager that listens while open."""

    def __init__(self, sim: KubeSim, clock: SteppedClock, job: str) -> None:
        self.sim = sim
        self.clock = clock
        self.job = job
        self.at: dict[str, datetime] = {}
        self.pods = resource_type(sim.cluster, "v1", "Pod")

    def __enter__(self) -> Terminations:
        self.sim.cluster.add_listener(self._on_change)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.sim.cluster.remove_listener(self._on_change)

    def _on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], _old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (
            rt != self.pods
            or labels.get(JOB_LABEL) != self.job
            or labels.get(ROLE_LABEL) != "worker"
        ):
            return
        if event == "DELETED" or meta.get("deletionTimestamp"):
            self.at.setdefault(str(meta["name"]), self.clock.utc_now())


async def run_script(script: str, tmp: Path) -> tuple[int | None, str, str]:
    """Runs a `discover_hosts.sh` text with `sh`, as Horovod does: (exit code, stdout, stderr).

    A file per run: two readers can run at once, and one truncating a shared file under the other's
    `sh` made that `sh` print nothing. A cancelled run still reaps its `sh`: one left to the garbage
    collector fails a later test with an unraisable ResourceWarning."""
    fd, name = tempfile.mkstemp(prefix="discover_hosts-", suffix=".sh", dir=tmp)
    with os.fdopen(fd, "w") as file:
        file.write(script)
    proc = await asyncio.create_subprocess_exec(
        "sh", name, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await proc.communicate()
    finally:
        await stop_process(proc)
    return proc.returncode, out.decode(), err.decode()
