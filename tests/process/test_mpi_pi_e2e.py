"""Upstream's pi MPIJobs, applied unchanged with the real kubectl, run by real sshd and real MPIs.

kubesim runs the pods as real processes (the process runtime) with the stand-in images of
`mpi_images.py`; the operator runs in its own process (`mpi-operator run`), as on a cluster.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from procrt_helpers import PROCESS_TIME_SCALE

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl
from process.mpi_images import catalog, missing

MANIFESTS = Path(__file__).parent / "manifests"
PI = "pi is approximately 3.1410376000000002"


@pytest.fixture
def kubesim_settings(process_runtime: None) -> SimSettings:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    return SimSettings(runtime="process", time_scale=PROCESS_TIME_SCALE, images=catalog())


@pytest_asyncio.fixture
async def operator(kubesim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> AsyncIterator[Path]:
    """The CRD installed and `mpi-operator run` started; yields the operator's log file."""
    crd = Path(__file__).parents[2] / "crds" / "kubeflow.org_mpijobs.yaml"
    rc, _, err = await kubectl("apply", "-f", str(crd))
    assert rc == 0, err
    rc, _, err = await kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org")
    assert rc == 0, err
    log = tmp_path / "operator.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mpi_operator", "run", "--kubeconfig", str(kubesim.kubeconfig_path),
            "--no-leader-elect", "--metrics-address", "127.0.0.1:0",
            stdout=asyncio.subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
        try:
            yield log
        finally:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def run_pi(kubectl: Kubectl, manifest: Path, *, within: int = 90) -> str:
    """Applies `manifest`, waits for the MPIJob to succeed, returns the launcher's log."""
    rc, _, err = await kubectl("apply", "-f", str(manifest))
    assert rc == 0, err
    rc, out, err = await kubectl(
        "wait", "--for=condition=Succeeded", "mpijobs.v2beta1.kubeflow.org/pi", f"--timeout={within}s",
        limit=within + 30,
    )  # fmt: skip
    if rc != 0:
        _, pods, _ = await kubectl("get", "pods", "-o", "wide")
        _, logs, _ = await kubectl("logs", "job/pi-launcher")
        _, job, _ = await kubectl("get", "mpijobs.v2beta1.kubeflow.org/pi", "-o", "yaml")
        _, workers, _ = await kubectl("logs", "pi-worker-0", "--all-containers")
        _, worker_pod, _ = await kubectl("get", "pod", "pi-worker-0", "-o", "yaml")
        raise AssertionError(
            f"{err}\n{pods}\nlauncher log:\n{logs}\n{job}\nworker-0 log:\n{workers}\n{worker_pod}"
        )
    rc, out, err = await kubectl("logs", "job/pi-launcher")
    assert rc == 0, err
    return out


def ranks(log: str) -> dict[str, str]:
    """rank -> host, from the pi program's `Rank <r> on host <host>` lines."""
    found = {}
    for line in log.splitlines():
        words = line.split()
        if len(words) == 5 and words[0] == "Rank" and words[2:4] == ["on", "host"]:
            found[words[1]] = words[4]
    return found


@pytest.mark.kubectl
@pytest.mark.timeout(300)
@pytest.mark.parametrize("manifest", ["pi.yaml", "pi-mpich.yaml", "pi-intel.yaml"])
async def test_upstream_pi_succeeds_with_a_rank_on_every_worker(
    manifest: str, kubesim: KubeSim, kubectl: Kubectl, operator: Path
) -> None:
    log = await run_pi(kubectl, MANIFESTS / manifest)
    assert PI in log, log
    assert "Workers: 2" in log
    assert sorted(ranks(log).items()) == [("0", "pi-worker-0"), ("1", "pi-worker-1")], log
