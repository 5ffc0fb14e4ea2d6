"""The process-runtime tier: kubesim pods that run real programs (root only; skipped elsewhere).

`kubesim_settings` runs the process runtime with the stand-ins of upstream's MPI images; tests that
need the MPI software itself ask for `mpi_software` (skips with the reason when it is not installed)
and the operator in its own process (`mpi_operator`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl
from operator_testing import operator_process

from .mpi_images import catalog, missing
from .procrt_helpers import PROCESS_TIME_SCALE

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
    assert kubesim.kubeconfig_path is not None
    async with operator_process(kubesim.kubeconfig_path, log):
        yield log
