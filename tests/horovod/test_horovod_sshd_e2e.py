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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hvd_image
import pytest
import yaml
from hvd_shared import (
    NS,
    TRAINED,
    describe,
    fqdn,
    in_worker,
    is_ready,
    output_lines,
    pods,
    rank_hosts,
)

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, eventually, wait_for
from operator_testing import operator_process

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "elastic" / "pytorch-synthetic-elastic.yaml"
CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"

pytestmark = hvd_image.NEEDS_SSHD


@pytest.fixture
def kubesim_settings(
    process_runtime: None, horovod_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> SimSettings:
    return hvd_image.sim_settings(tmp_path_factory, horovod_venv)


class Run:
    """The job's readings, and what a failure message needs: its worker pods, the launcher's log
    (all of it written beside the operator's) and the operator's last lines."""

    def __init__(self, sim: KubeSim, job: str, root: Path) -> None:
        self.sim, self.job, self.root = sim, job, root
        self.mark = 0

    def lines(self) -> list[str]:
        return output_lines(self.sim, self.job)

    def begin(self) -> None:
        """From now on, only new launcher output counts."""
        self.mark = len(self.lines())

    async def report(self) -> str:
        found = ["worker pods:"]
        for pod in pods(self.sim, self.job, "worker"):
            try:
                ps = await in_worker(self.sim, pod, ["ps", "-eo", "pid,user,args"])
            except TimeoutError:
                ps = None
            out = ps[1].decode(errors="replace").splitlines() if ps is not None else ["(no ps)"]
            found += [f"  {describe(pod)}", *(f"    {line[:160]}" for line in out)]
        found.append(f"ranks seen in: {sorted(await rank_hosts(self.sim, self.job))}")
        log = output_lines(self.sim, self.job, timed=True)
        (self.root / "launcher.log").write_text("\n".join(log))
        # Rank 0's line per iteration would crowd out the driver's resets and blacklists.
        progress = [line for line in log if TRAINED.search(line)]
        quiet = [line for line in log if not TRAINED.search(line)]
        found += [f"launcher log without progress lines ({self.root / 'launcher.log'}):"]
        found += [*quiet[-40:], *progress[-3:]]
        workers = output_lines(self.sim, self.job, timed=True, role="worker")
        found += ["workers' log:", *workers[-30:]]
        operator = (self.root / "operator.log").read_text(errors="replace").splitlines()
        found += ["operator log:", *operator[-30:]]
        return "\n".join(found)

    async def until(self, check: Callable[[], Any], what: str, within: float) -> Any:
        try:
            return await eventually(check, sim=self.sim, within=within)
        except AssertionError as err:
            raise AssertionError(f"{what}, after {within} s:\n{await self.report()}") from err

    async def world(self, processes: int, within: float = 240) -> None:
        """Waits until rank 0 reports training on `processes` since `begin`."""
        want = f"on {processes} processes"

        def seen() -> bool:
            return any(want in line for line in self.lines()[self.mark :])

        await self.until(seen, f"no {want!r} in the launcher's log", within)

    async def ranks_on(self, hostname: str, within: float = 240) -> None:
        """Waits until Horovod's training processes run in the container of the worker whose host
        name is `hostname`."""
        host = fqdn(hostname, self.job)

        # The processes appear inside the container, outside the API: with `sim`, the check runs
        # after each change of the cluster and once a second, not in a tight loop of `pgrep`.
        async def running() -> bool:
            return host in await rank_hosts(self.sim, self.job)

        await self.until(running, f"no rank of Horovod on {host}", within)


def replaced(sim: KubeSim, job: str, pod_name: str) -> str | None:
    """The host name of the Ready pod that replaced `pod_name`'s host (a fresh host name, same pod
    name)."""
    for pod in pods(sim, job, "worker"):
        hostname = pod["spec"]["hostname"]
        if pod["metadata"]["name"] == pod_name and hostname != pod_name and is_ready(pod):
            return str(hostname)
    return None


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
    # return. The driver's INFO lines (resets, blacklists) are what a failure message needs.
    # That return is a reset of its own (new ranks: 14-15 s here), begun up to 10 s after the kill;
    # the replacement's addition must come after it, or Horovod drops whichever notice lands in the
    # other's reset and the world stays at 4.
    job["spec"]["elasticPolicy"]["settleSeconds"] = 30
    launcher["command"] = [
        launcher["command"][0],
        *("--blacklist-cooldown-range", "5", "10", "--log-level", "INFO"),
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
    run = Run(kubesim, name, tmp_path)
    async with operator_process(kubesim.kubeconfig_path, tmp_path / "operator.log"):
        rc, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(job))
        assert rc == 0, err
        await run.world(4)

        run.begin()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{name}", "--replicas=3")
        assert rc == 0, err
        await run.world(6)

        # The node kills worker 1 (all its processes, sshd and Horovod's included): Horovod drops
        # the host, the operator replaces the pod under a fresh host name, and the world grows back.
        kubelet = kubesim.controllers.kubelet
        assert kubelet is not None
        kubelet.kill(NS, f"{name}-worker-1")
        replacement = await wait_for(
            kubesim, lambda: replaced(kubesim, name, f"{name}-worker-1"), within=240
        )
        # Horovod's world may shrink to 4 processes first or re-form at 6 at once, depending on when
        # the replacement is listed; either way its ranks must run on the replacement.
        await run.ranks_on(replacement)
        run.begin()
        await run.world(6)

        run.begin()
        rc, _, err = await kubectl("scale", f"mpijob.v2beta1.kubeflow.org/{name}", "--replicas=1")
        assert rc == 0, err
        await run.world(2)
        rc, _, err = await kubectl("delete", "mpijob.v2beta1.kubeflow.org", name, "--wait=false")
        assert rc == 0, err
