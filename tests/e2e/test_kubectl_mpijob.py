"""Issue 4's "Done when", as a person would do it: `mpi-operator sim` and `mpi-operator run
--kubeconfig ... --no-leader-elect` as processes, the real kubectl: apply the CRD and a 2-worker GPU
MPIJob, watch `kubectl get mpij` go Created -> Running -> Succeeded, find the launcher with the
legacy labels, read the workers' GPU limits and the launcher's blank NVIDIA variables. And on a
cluster with one GPU, the same job's workers Pending as `get` and `describe` show it."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from kubesim.testing import Kubectl, eventually, kubectl_for
from operator_testing import operator_process, sim_process, stop_process

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.kubectl

JOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "default"},
    "spec": {
        "runPolicy": {"cleanPodPolicy": "Running"},
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    # Running for seconds: the workers are still there when the test reads them.
                    "metadata": {
                        "annotations": {"kubesim/start-seconds": "0.5", "kubesim/run-seconds": "4"}
                    },
                    "spec": {
                        "containers": [{"name": "launcher", "image": "mpioperator/mpi-pi:openmpi"}]
                    },
                },
            },
            "Worker": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "worker",
                                "image": "mpioperator/mpi-pi:openmpi",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ]
                    }
                },
            },
        },
    },
}


@pytest_asyncio.fixture
async def sim(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Path]:
    """`mpi-operator sim` in its own process, with the flags a test gives (indirect parameter)
    after the pod timing; yields the kubeconfig it wrote."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    flags = ("--start-seconds", "0.3", "--ready-seconds", "0.3", *getattr(request, "param", ()))
    async with sim_process(kubeconfig, tmp_path / "sim.out", *flags):
        yield kubeconfig


@pytest_asyncio.fixture
async def operator(sim: Path, tmp_path: Path) -> AsyncIterator[Path]:
    """`mpi-operator run` against the sim; yields its log file (shown when a test fails)."""
    log = tmp_path / "operator.log"
    async with operator_process(sim, log):
        yield log


@pytest.fixture
def kubectl_sim(sim: Path, tmp_path: Path) -> Kubectl:
    return kubectl_for(sim, tmp_path)


def tail(path: Path, size: int = 3000) -> str:
    return path.read_text()[-size:]


def printer_columns() -> str:
    """`custom-columns=` from the CRD's own printer columns: kubectl then evaluates their JSONPath
    itself.

    kubesim's server-side table renderer does not implement JSONPath slices (`[-1:]`), so the
    default `kubectl get mpij` table shows an empty STATE there (a real API server fills it)."""
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    cols = ["NAME:.metadata.name"]
    cols += [f"{c['name'].upper()}:{c['jsonPath']}" for c in version["additionalPrinterColumns"]]
    return "custom-columns=" + ",".join(cols)


PRINTER_COLUMNS = printer_columns()


class RowWatch:
    """`kubectl get mpij NAME --watch` with the printer columns: every version of the job kubectl is
    sent, as a row by column header, in order. Nothing is missed between two looks, unlike a
    `kubectl get` loop, and a wait for a row is a wait for the event itself."""

    def __init__(self, kubectl: Kubectl, name: str) -> None:
        self.kubectl = kubectl
        self.name = name
        self.header = [
            column.split(":", 1)[0]
            for column in PRINTER_COLUMNS.removeprefix("custom-columns=").split(",")
        ]
        self.rows: list[dict[str, str]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None
        self.errors: list[str] = []
        self.error_reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RowWatch:
        args = ("get", "mpij", self.name, "--watch", "--no-headers", "-o", PRINTER_COLUMNS)
        env = {
            **os.environ,
            "HOME": str(self.kubectl.home),
            "KUBECONFIG": str(self.kubectl.kubeconfig),
        }
        self.proc = await asyncio.create_subprocess_exec(
            *self.kubectl.argv(*args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self.reader = asyncio.create_task(self._read(self.proc))
        self.error_reader = asyncio.create_task(self._read_errors(self.proc))
        return self

    async def _read_errors(self, proc: asyncio.subprocess.Process) -> None:
        """kubectl's warnings (a deprecated version) and errors, kept for a failure's message."""
        assert proc.stderr is not None
        async for line in proc.stderr:
            self.errors.append(line.decode())

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            cells = line.decode().split()
            # Empty cells print as `<none>`, so a row without spaces in its values splits cleanly.
            assert len(cells) == len(self.header), f"unexpected kubectl output: {line!r}"
            self.rows.append(dict(zip(self.header, cells, strict=True)))

    def states(self) -> list[str]:
        """The STATE column as it changed (`<none>` is before the first status)."""
        out: list[str] = []
        for row in self.rows:
            if not out or out[-1] != row["STATE"]:
                out.append(row["STATE"])
        return out

    async def row_in(self, state: str, log: Path) -> dict[str, str]:
        """The first row in `state`, once kubectl has printed it."""

        def check() -> dict[str, str] | None:
            assert self.reader is not None
            if self.reader.done():
                self.reader.result()
                raise AssertionError(f"kubectl get --watch ended: {self.rows} {self.errors}")
            return next((row for row in self.rows if row["STATE"] == state), None)

        try:
            return await eventually(check, within=60, what=f"kubectl get mpij: {state}")
        except AssertionError as exc:
            pytest.fail(
                f"{exc}; states seen {self.states()} {self.errors}; operator log:\n{tail(log)}"
            )

    async def __aexit__(self, *_exc: object) -> None:
        assert self.proc is not None
        assert self.reader is not None
        assert self.error_reader is not None
        await stop_process(self.proc, grace=5)
        with contextlib.suppress(AssertionError):
            await self.reader
        await self.error_reader


async def test_kubectl_user_journey(kubectl_sim: Kubectl, operator: Path, tmp_path: Path) -> None:
    kubectl = kubectl_sim
    rc, out, err = await kubectl("apply", "-f", str(ROOT / "crds" / "kubeflow.org_mpijobs.yaml"))
    assert rc == 0, err
    rc, out, err = await kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org")
    assert rc == 0, err
    manifest = tmp_path / "pi.yaml"
    manifest.write_text(yaml.safe_dump(JOB))
    rc, out, err = await kubectl("apply", "-f", str(manifest))
    assert rc == 0, err
    assert "warning" not in err.lower(), err

    async with RowWatch(kubectl, "pi") as watch:
        await watch.row_in("Running", operator)
        # The workers first: cleanPodPolicy Running deletes them once the launcher succeeds.
        rc, out, err = await kubectl(
            "get", "pod", "pi-worker-0", "-o", "jsonpath={.spec.containers[0].resources.limits}"
        )
        assert rc == 0, err
        assert json.loads(out) == {"nvidia.com/gpu": "1"}
        rc, out, err = await kubectl(
            "get", "pods", "-l", "mpi_job_name=pi,mpi_role_type=launcher", "-o", "name"
        )
        assert rc == 0, err
        launcher_pods = out.split()
        assert len(launcher_pods) == 1
        assert launcher_pods[0].startswith("pod/pi-launcher-")
        rc, out, err = await kubectl(
            "get", launcher_pods[0], "-o", "jsonpath={.spec.containers[0].env}"
        )
        assert rc == 0, err
        env = {e["name"]: e.get("value", "") for e in json.loads(out)}
        assert env["NVIDIA_VISIBLE_DEVICES"] == ""
        assert env["NVIDIA_DRIVER_CAPABILITIES"] == ""
        assert env["OMPI_MCA_orte_set_default_slots"] == "1"

        final = await watch.row_in("Succeeded", operator)
    # The watch sees every version of the job: each state once, in order.
    assert [s for s in watch.states() if s != "<none>"] == ["Created", "Running", "Succeeded"], (
        watch.states()
    )
    assert final["WORKERS"] == "2"


ONE_GPU = ("--nodes", "1", "--node-allocatable", "cpu=16,memory=64Gi,nvidia.com/gpu=1")
FIT_ERROR = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


@pytest.mark.parametrize("sim", [ONE_GPU], indirect=True)
async def test_get_and_describe_say_the_workers_are_pending(
    kubectl_sim: Kubectl, operator: Path, tmp_path: Path
) -> None:
    """Pending is visible: on one node with one GPU, the 2-worker GPU job's `kubectl get mpij`
    row shows WorkersPending (not Created, not Running) with one Ready worker, and `kubectl
    describe mpij` carries the Warning in the scheduler's own words."""
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
