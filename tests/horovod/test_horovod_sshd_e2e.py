"""Elastic Horovod with the real sshd: the shipped PyTorch example runs in kubesim's process
runtime.

Unlike test_horovod_elastic_e2e.py (horovodrun on this machine, a stand-in ssh), every piece runs as
it would in the cluster: the launcher pod runs `horovodrun` with the mounted discover_hosts.sh,
Horovod starts its workers over ssh to the workers' real sshd (uid 1000, port 2222, StrictModes, the
job's keys), Gloo connects the pods over the pod network, and the operator runs in its own process.
The worlds Horovod forms are read from the launcher's log (`on N processes`, printed by rank 0).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hvd_image
import pytest
import yaml

from kubesim.app import KubeSim
from kubesim.procrt import logs
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually, wait_for
from operator_testing import operator_process

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "elastic" / "pytorch-synthetic-elastic.yaml"
CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
NS = "default"

pytestmark = hvd_image.NEEDS_SSHD


@pytest.fixture
def kubesim_settings(
    process_runtime: None, horovod_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> SimSettings:
    return hvd_image.sim_settings(tmp_path_factory, horovod_venv)


def pods(sim: KubeSim, role: str) -> list[dict[str, Any]]:
    rt = sim.cluster.registry.by_kind("v1", "Pod")
    assert rt is not None
    selector = f"training.kubeflow.org/job-role={role}"
    return list(sim.cluster.list(rt, NS, label_selector=selector)["items"])


def launcher_lines(sim: KubeSim, since: datetime) -> list[str]:
    """The launcher container's output lines written at or after `since`."""
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    found = []
    for pod in pods(sim, "launcher"):
        statuses = pod.get("status", {}).get("containerStatuses") or []
        base = kubelet.log_dir(NS, pod["metadata"]["name"], pod["metadata"]["uid"])  # type: ignore[attr-defined]
        for status in statuses:
            for run in range(int(status.get("restartCount") or 0) + 1):
                path = base / status["name"] / f"{run}.log"
                for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
                    parsed = logs.parse(line)
                    if parsed is not None and parsed[0] >= since:
                        found.append(parsed[3])
    return found


async def world(sim: KubeSim, processes: int, since: datetime, within: float = 240) -> None:
    want = f"on {processes} processes"

    def seen() -> bool:
        return any(want in line for line in launcher_lines(sim, since))

    try:
        await wait_for(sim, seen, within=within)
    except AssertionError as err:
        tail = "\n".join(launcher_lines(sim, datetime.fromtimestamp(0, UTC))[-60:])
        raise AssertionError(f"no {want!r} in the launcher's log since {since}:\n{tail}") from err


def replaced(sim: KubeSim, pod_name: str) -> str | None:
    """The name of the Ready pod that replaced `pod_name`'s host (a fresh host name, same pod
    name)."""
    for pod in pods(sim, "worker"):
        conditions = pod.get("status", {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        if pod["metadata"]["name"] == pod_name and pod["spec"]["hostname"] != pod_name and ready:
            return str(pod["metadata"]["name"])
    return None


async def ranks_on(sim: KubeSim, pod_name: str, within: float = 240) -> None:
    """Waits until Horovod's training processes run inside the worker pod's container."""
    kubelet = sim.controllers.kubelet
    assert kubelet is not None

    async def running() -> bool:
        run = kubelet._workers[(NS, pod_name)].runs["worker"]  # type: ignore[attr-defined]
        code, _ = await run.exec(["pgrep", "-f", "pytorch_synthetic_elastic.py"], 10)
        return bool(code == 0)

    # The processes appear inside the container, outside the API: with `sim`, the check runs after
    # each change of the cluster and once a second, not in a tight loop of `pgrep` processes.
    await eventually(running, sim=sim, within=within, what=f"Horovod's ranks in {pod_name}")


def now() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC)


@pytest.mark.kubectl
@pytest.mark.timeout(1200)
async def test_the_pytorch_example_scales_and_survives_a_killed_worker_over_real_sshd(
    kubesim: KubeSim, kubectl: Kubectl, tmp_path: Path
) -> None:
    rc, _, err = await kubectl("apply", "-f", str(CRD))
    assert rc == 0, err
    rc, _, err = await kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org")
    assert rc == 0, err
    job = yaml.safe_load(EXAMPLE.read_text())
    name = job["metadata"]["name"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    # On a loaded machine a surviving worker's rank can fail during the reset after the kill;
    # Horovod then blacklists that host for good and the world never grows back. A cooldown lets it
    # return.
    launcher["command"] = [
        launcher["command"][0],
        "--blacklist-cooldown-range",
        "5",
        "10",
        *launcher["command"][1:],
    ]
    launcher["args"] = [
        *launcher["args"],
        *(
            "--model",
            "tiny",
            "--iterations",
            "1000000",
            "--batches-per-iteration",
            "5",
            "--image-size",
            "32",
        ),
    ]
    assert kubesim.kubeconfig_path is not None
    async with operator_process(kubesim.kubeconfig_path, tmp_path / "operator.log"):
        t = now()
        rc, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(job))
        assert rc == 0, err
        await world(kubesim, 4, t)

        t = now()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{name}", "--replicas=3")
        assert rc == 0, err
        await world(kubesim, 6, t)

        # The node kills worker 1 (all its processes, sshd and Horovod's included): Horovod drops
        # the host, the operator replaces the pod under a fresh host name, and the world grows back.
        t = now()
        kubelet = kubesim.controllers.kubelet
        assert kubelet is not None
        kubelet.kill(NS, f"{name}-worker-1")
        replacement = await wait_for(
            kubesim, lambda: replaced(kubesim, f"{name}-worker-1"), within=240
        )
        # Horovod's world may shrink to 4 processes first or re-form at 6 at once, depending on when
        # the replacement is listed; either way its ranks must run on the replacement.
        await ranks_on(kubesim, replacement)
        await world(kubesim, 6, now())

        t = now()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{name}", "--replicas=1")
        assert rc == 0, err
        await world(kubesim, 2, t)
        rc, _, err = await kubectl("delete", "mpijob.v2beta1.kubeflow.org", name, "--wait=false")
        assert rc == 0, err
