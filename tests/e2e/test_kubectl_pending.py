"""Pending is visible to a person with the real kubectl: on a one-node `mpi-operator sim` with one
GPU, a 2-worker GPU MPIJob's `kubectl get mpij` row shows the WorkersPending state (not Created,
not Running) with one Ready worker, and `kubectl describe mpij` carries the Warning with the
scheduler's own words."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from kubesim.testing import Kubectl, eventually, kubectl_for
from operator_testing import operator_process, sim_process

from .test_kubectl_mpijob import JOB, PRINTER_COLUMNS, ROOT, tail

pytestmark = pytest.mark.kubectl

FIT_ERROR = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


@pytest_asyncio.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Path]:
    kubeconfig = tmp_path / "sim.kubeconfig"
    flags = ("--start-seconds", "0.3", "--ready-seconds", "0.3", "--nodes", "1")
    flags += ("--node-allocatable", "cpu=16,memory=64Gi,nvidia.com/gpu=1")
    async with sim_process(kubeconfig, tmp_path / "sim.out", *flags):
        yield kubeconfig


@pytest_asyncio.fixture
async def operator(sim: Path, tmp_path: Path) -> AsyncIterator[Path]:
    log = tmp_path / "operator.log"
    async with operator_process(sim, log):
        yield log


@pytest.fixture
def kubectl_sim(sim: Path, tmp_path: Path) -> Kubectl:
    return kubectl_for(sim, tmp_path)


async def test_get_and_describe_say_the_workers_are_pending(
    kubectl_sim: Kubectl, operator: Path, tmp_path: Path
) -> None:
    kubectl = kubectl_sim
    rc, _, err = await kubectl("apply", "-f", str(ROOT / "crds" / "kubeflow.org_mpijobs.yaml"))
    assert rc == 0, err
    rc, _, err = await kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org")
    assert rc == 0, err
    job = copy.deepcopy(JOB)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]["annotations"]
    launcher["kubesim/run-seconds"] = "3600"  # it would not end before the worker fits anyway
    manifest = tmp_path / "pi.yaml"
    manifest.write_text(yaml.safe_dump(job))
    rc, _, err = await kubectl("apply", "-f", str(manifest))
    assert rc == 0, err

    async def row() -> dict[str, str] | None:
        rc, out, err = await kubectl("get", "mpij", "pi", "-o", PRINTER_COLUMNS)
        assert rc == 0, err
        header, values = (line.split() for line in out.splitlines())
        cells = dict(zip(header, values, strict=True))
        return cells if cells["STATE"] == "WorkersPending" and cells["READY"] == "1" else None

    try:
        cells = await eventually(row, within=60, what="kubectl get mpij: WorkersPending")
    except AssertionError as exc:
        pytest.fail(f"{exc}; operator log:\n{tail(operator)}")
    assert cells["WORKERS"] == "2"

    rc, out, err = await kubectl("describe", "mpij", "pi")
    assert rc == 0, err
    assert "Warning  WorkersPending" in out, out
    said = " ".join(out.split())  # describe wraps long messages
    assert f"1/2 workers are Pending; pi-worker-1: {FIT_ERROR}" in said, out
