"""`mpi-operator run` as a process against `mpi-operator sim`: exits 1 with a clear message without the
CRD; with it, becomes ready on /readyz, serves /metrics, and exits 0 on SIGTERM. Also: flags -> Settings."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
import yaml

from kubesim.testing import eventually
from mpi_operator import cli
from mpi_operator.api.constants import MAX_WORKER_REPLICAS
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import MPIJOB, Resource
from operator_testing import sim_process

ROOT = Path(__file__).resolve().parents[2]
CRD = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition")

_TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]}}
MPIJOB_BODY = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "default"},
    "spec": {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": _TEMPLATE},
            "Worker": {"replicas": 1, "template": _TEMPLATE},
        }
    },
}

needs_sim = pytest.mark.skipif(
    importlib.util.find_spec("kubesim.cli") is None,
    reason="`mpi-operator sim` needs kubesim.cli, which is not importable yet",
)


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


@pytest_asyncio.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Path]:
    """A `mpi-operator sim` subprocess; yields the kubeconfig it wrote."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with sim_process(kubeconfig, tmp_path / "sim.out"):
        yield kubeconfig


async def start_operator(kubeconfig: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mpi_operator",
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--metrics-address",
        "127.0.0.1:0",
        "--log-format",
        "json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def next_log(proc: asyncio.subprocess.Process, seen: list[dict[str, object]]) -> dict[str, object]:
    assert proc.stderr is not None
    raw = await proc.stderr.readline()
    assert raw, f"operator exited ({await proc.wait()}); logs: {seen}"
    entry = json.loads(raw)
    seen.append(entry)
    return entry


@needs_sim
async def test_run_without_the_crd_exits_1_with_a_clear_message(sim: Path) -> None:
    proc = await start_operator(sim)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await stop(proc)
    assert proc.returncode == 1
    last = json.loads(err.decode().strip().splitlines()[-1])
    assert last["level"] == "error"
    assert "mpijobs.kubeflow.org" in str(last["msg"])
    assert "not installed" in str(last["msg"])


@needs_sim
async def test_run_becomes_ready_and_exits_0_on_sigterm(sim: Path) -> None:
    kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1)
    try:
        crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
        await kube.create(CRD, crd)
    finally:
        await kube.close()
    proc = await start_operator(sim)
    seen: list[dict[str, object]] = []
    try:
        async with asyncio.timeout(30):
            while "serving /healthz" not in str((entry := await next_log(proc, seen))["msg"]):
                pass
            url = str(entry["msg"]).rsplit(" ", 1)[-1]
            async with aiohttp.ClientSession() as session:

                async def ready() -> bool:
                    async with session.get(f"{url}/readyz") as response:
                        return response.status == 200

                await eventually(ready, within=30, what="/readyz to answer 200")
                async with session.get(f"{url}/metrics") as response:
                    assert "mpi_operator_is_leader 1.0" in await response.text()
            kube = await Kube.from_kubeconfig(str(sim), qps=0, burst=1)
            try:
                await kube.create(MPIJOB, MPIJOB_BODY)
            finally:
                await kube.close()
            # The reconciler logs each write; the JSON line names the job it was reconciling.
            while (entry := await next_log(proc, seen)).get("key") != "default/pi":
                pass
            assert str(entry["msg"]) == "create Service default/pi"
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        await stop(proc)
    assert proc.returncode == 0, err.decode()
    assert '"msg": "stopped"' in err.decode()


FLAG_CASES = [
    (
        [],
        {
            "namespaces": (),
            "workers": 2,
            "leader_elect": True,
            "lease_namespace": "from-env",
            "max_workers_per_job": None,  # the API's ceiling
        },
    ),
    (
        ["--namespace", "a", "--namespace", "b", "--namespace", "a", "--workers", "8", "--no-leader-elect"],
        {"namespaces": ("a", "b"), "workers": 8, "leader_elect": False},
    ),
    (["--namespace", ""], {"namespaces": ()}),
    (
        ["--qps", "50", "--burst", "100", "--metrics-address", ":9090", "--log-format", "json"],
        {"qps": 50.0, "burst": 100, "metrics_address": ":9090", "log_format": "json"},
    ),
    (
        ["--cluster-domain", "cluster.local", "--gpus-per-node", "4", "--gang-scheduling", "volcano"],
        {"cluster_domain": "cluster.local", "gpus_per_node": 4, "gang_scheduling": "volcano"},
    ),
    (["--kubeconfig", "/k", "--lease-namespace", "ops"], {"kubeconfig": "/k", "lease_namespace": "ops"}),
    (["--max-workers-per-job", "64"], {"max_workers_per_job": 64}),
]


@pytest.mark.parametrize(
    ("argv", "expected"),
    FLAG_CASES,
    ids=[
        "defaults",
        "namespaces-workers-no-le",
        "empty-namespace-is-all",
        "api-serving-logs",
        "mpi",
        "paths",
        "worker-limit",
    ],
)
def test_run_flags_become_settings(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: dict[str, object]
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    settings = cli.run_settings(cli._build_parser().parse_args(["run", *argv]))
    assert {name: getattr(settings, name) for name in expected} == expected


def test_lease_namespace_falls_back_to_mpi_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert cli.run_settings(cli._build_parser().parse_args(["run"])).lease_namespace == "mpi-operator"


def test_run_rejects_zero_workers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("value", [str(MAX_WORKER_REPLICAS + 1), "0", "2147483647"])
def test_run_refuses_a_worker_limit_that_would_raise_the_ceiling(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert cli.main(["run", "--max-workers-per-job", value]) == 2
    err = capsys.readouterr().err
    assert f"--max-workers-per-job must be between 1 and {MAX_WORKER_REPLICAS}, got {value}" in err
    assert "may only lower the ceiling" in err
