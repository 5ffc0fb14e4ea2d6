"""The process-runtime tier: kubesim pods that run real programs (root only; skipped elsewhere).

`kubesim_settings` runs the process runtime with the stand-ins of upstream's MPI images; tests that
need the MPI software itself ask for `mpi_software` (skips with the reason when it is not installed) and
the operator in its own process (`mpi_operator`).
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

CRD = Path(__file__).parents[2] / "crds" / "kubeflow.org_mpijobs.yaml"


@pytest.fixture
def kubesim_settings(process_runtime: None) -> SimSettings:
    return SimSettings(
        runtime="process", time_scale=PROCESS_TIME_SCALE, volume_sync_seconds=5.0, images=catalog()
    )


@pytest.fixture
def mpi_software() -> None:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)


@pytest_asyncio.fixture
async def mpi_operator(
    mpi_software: None, kubesim: KubeSim, kubectl: Kubectl, tmp_path: Path
) -> AsyncIterator[Path]:
    """The CRD installed and `mpi-operator run` started in its own process; yields its log file."""
    rc, _, err = await kubectl("apply", "-f", str(CRD))
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
