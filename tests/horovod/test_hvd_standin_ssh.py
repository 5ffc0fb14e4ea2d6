"""The stand-in `ssh` of the real-Horovod test models a worker container faithfully enough to trust
what that test concludes from it: a session on a pod that is not Ready is refused, a session dies
with its pod's container (SIGKILL) or with the pod's deletion (SIGTERM), and a command that ends on
its own is not reported as killed. Without these, "no worker was killed before Horovod let it go"
could not fail."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from integration.reconcile.harness import NS
from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube

STANDIN = Path(__file__).resolve().parent / "hvd_standin_ssh.py"
SSH_OPTIONS = ("-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no")


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(start_seconds=0.05, ready_seconds=0.05)


def worker(name: str, hostname: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"training.kubeflow.org/job-role": "worker"},
            "annotations": annotations,
        },
        "spec": {
            "hostname": hostname,
            "subdomain": "job",
            "restartPolicy": "Never",
            "containers": [{"name": "worker", "image": "busybox"}],
        },
    }


async def ready(kube: Kube, name: str) -> None:
    async def check() -> bool:
        pod = await kube.get(resources.POD, name, NS)
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    await eventually(check, what=f"{name} to be Ready")


async def ssh(sim: KubeSim, log: Path, host: str, command: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "HVD_KUBESIM_URL": sim.url, "HVD_NAMESPACE": NS, "HVD_SSH_LOG": str(log)}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(STANDIN),
        *SSH_OPTIONS,
        f"{host}.job.{NS}.svc",
        "-p",
        "22",
        command,
        env=env,
    )


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def started(log: Path) -> None:
    async def check() -> bool:
        return any(r["event"] == "start" for r in records(log))

    await eventually(check, what="the session to start")


@pytest.mark.parametrize("fault", ["kill", "delete"])
async def test_a_session_dies_with_its_pod(
    kubesim: KubeSim, kube: Kube, tmp_path: Path, fault: str
) -> None:
    await kube.create(resources.POD, worker("w-1", "w-1-r1"))
    await ready(kube, "w-1")
    log = tmp_path / "ssh.jsonl"
    proc = await ssh(kubesim, log, "w-1-r1", "sleep 60")
    await started(log)
    if fault == "kill":
        kubesim.controllers.kubelet.kill(NS, "w-1", exit_code=137)
    else:
        await kube.delete(resources.POD, "w-1", namespace=NS)
    async with asyncio.timeout(10):
        assert await proc.wait() == 255
    end = records(log)[-1]
    assert end["event"] == "end"
    assert end["killed"] == ("container exited 137" if fault == "kill" else "pod deleted"), end


async def test_a_command_that_ends_on_its_own_is_not_killed(
    kubesim: KubeSim, kube: Kube, tmp_path: Path
) -> None:
    await kube.create(resources.POD, worker("w-0", "w-0"))
    await ready(kube, "w-0")
    log = tmp_path / "ssh.jsonl"
    proc = await ssh(kubesim, log, "w-0", "cd / > /dev/null 2>&1 ; exit 134")
    async with asyncio.timeout(10):
        assert await proc.wait() == 134
    assert records(log)[-1] | {"t": 0} == {
        "t": 0,
        "event": "end",
        "host": f"w-0.job.{NS}.svc",
        "pod": "w-0",
        "uid": records(log)[0]["uid"],
        "exit": 134,
        "killed": None,
    }


@pytest.mark.parametrize("host", ["w-9", "w-0"], ids=["no-such-pod", "old-incarnation-name"])
async def test_a_host_without_a_ready_pod_is_refused(
    kubesim: KubeSim, kube: Kube, tmp_path: Path, host: str
) -> None:
    await kube.create(resources.POD, worker("w-0", "w-0-r1"))
    await ready(kube, "w-0")
    log = tmp_path / "ssh.jsonl"
    proc = await ssh(kubesim, log, host, "true")
    async with asyncio.timeout(10):
        assert await proc.wait() == 255
    assert [r["event"] for r in records(log)] == ["refused"]
