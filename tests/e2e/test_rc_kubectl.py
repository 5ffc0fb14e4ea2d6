"""Issue 4's "Done when", as a person would do it: `mpi-operator sim` and `mpi-operator run --kubeconfig
... --no-leader-elect` as processes, the real kubectl: apply the CRD and a 2-worker GPU MPIJob, watch
`kubectl get mpij` go Created -> Running -> Succeeded, find the launcher with the legacy labels, read
the workers' GPU limits and the launcher's blank NVIDIA variables."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from kubesim.testing import Kubectl
from operator_testing import operator_process, sim_process

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
                    # A slow start keeps the job in Created long enough for any poll to see it.
                    "metadata": {"annotations": {"kubesim/start-seconds": "2", "kubesim/run-seconds": "4"}},
                    "spec": {"containers": [{"name": "launcher", "image": "mpioperator/mpi-pi:openmpi"}]},
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
async def sim(tmp_path: Path) -> AsyncIterator[Path]:
    """`mpi-operator sim` in its own process; yields the kubeconfig it wrote."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    flags = ("--start-seconds", "0.3", "--ready-seconds", "0.3")
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
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("the kubectl binary is not installed on this machine")
    home = tmp_path / "kubectl-home"
    home.mkdir()
    return Kubectl(binary, sim, tmp_path / "kubectl-cache", home)


def tail(path: Path, size: int = 3000) -> str:
    return path.read_text()[-size:]


def printer_columns() -> str:
    """`custom-columns=` from the CRD's own printer columns: kubectl then evaluates their JSONPath itself.

    kubesim's server-side table renderer does not implement JSONPath slices (`[-1:]`), so the
    default `kubectl get mpij` table shows an empty STATE there (a real API server fills it)."""
    crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    cols = ["NAME:.metadata.name"]
    cols += [f"{c['name'].upper()}:{c['jsonPath']}" for c in version["additionalPrinterColumns"]]
    return "custom-columns=" + ",".join(cols)


PRINTER_COLUMNS = printer_columns()


def columns(table: str) -> dict[str, str]:
    """The first row of `kubectl get` output by column header (empty cells are blank, not `<none>`)."""
    lines = table.splitlines()
    if len(lines) < 2:
        return {}
    header, row = lines[0], lines[1].ljust(len(lines[0]))
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    bounds = [*starts[1:], len(row)]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


async def poll(
    check: Callable[[], Awaitable[str | None]], what: str, log: Path, limit: float = 30, seen: object = None
) -> str:
    last: str | None = None
    try:
        async with asyncio.timeout(limit):
            while True:
                last = await check()
                if last is not None:
                    return last
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}; seen {seen}; operator log:\n{tail(log)}")


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

    states: list[str] = []
    seen: list[str] = []

    def watcher(want: str) -> Callable[[], Awaitable[str | None]]:
        async def check() -> str | None:
            rc, out, err = await kubectl("get", "mpij", "pi", "-o", PRINTER_COLUMNS)
            row = columns(out) if rc == 0 else {}
            seen.append(out + err)
            del seen[:-3]
            state = row.get("STATE", "")
            if state and (not states or states[-1] != state):
                states.append(state)
            return row.get("WORKERS") if state == want else None

        return check

    await poll(watcher("Running"), "kubectl get mpij: Running", operator, seen=(states, seen))
    rc, out, err = await kubectl("get", "pods", "-l", "mpi_job_name=pi,mpi_role_type=launcher", "-o", "name")
    assert rc == 0, err
    launcher_pods = out.split()
    assert len(launcher_pods) == 1
    assert launcher_pods[0].startswith("pod/pi-launcher-")

    rc, out, err = await kubectl(
        "get", "pod", "pi-worker-0", "-o", "jsonpath={.spec.containers[0].resources.limits}"
    )
    assert rc == 0, err
    assert json.loads(out) == {"nvidia.com/gpu": "1"}
    rc, out, err = await kubectl("get", launcher_pods[0], "-o", "jsonpath={.spec.containers[0].env}")
    assert rc == 0, err
    env = {e["name"]: e.get("value", "") for e in json.loads(out)}
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == ""
    assert env["OMPI_MCA_orte_set_default_slots"] == "1"

    final = await poll(watcher("Succeeded"), "kubectl get mpij: Succeeded", operator, seen=(states, seen))
    # Polling may miss a short-lived state, never reorder them; `<none>` is before the first status.
    assert [s for s in states if s != "<none>"] == ["Created", "Running", "Succeeded"], states
    assert final == "2"  # the Workers column
