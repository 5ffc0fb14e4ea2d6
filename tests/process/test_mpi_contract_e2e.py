"""The image contract, proven with the real sshd and MPIs: root and non-root images, StrictModes, a
worker whose sshd comes up late, and what Open MPI 5 does without the PRRTE settings.

Every job is upstream's pi example with one change, named in each test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesim.testing import Kubectl

from .mpi_e2e import PI, containers, manifest, ranks, run_mpijob

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(300)]

NON_ROOT_SSHD = ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
MANIFEST = {"OpenMPI": "pi.yaml", "MPICH": "pi-mpich.yaml", "Intel": "pi-intel.yaml"}


def launcher_argv(job: dict[str, Any]) -> list[str]:
    c = containers(job, "Launcher")[0]
    return [*(c.get("command") or []), *(c.get("args") or [])]


async def test_open_mpi_5_without_the_prrte_settings_runs_every_rank_on_the_launcher(
    kubectl: Kubectl, mpi_operator: Path
) -> None:
    # What upstream's variables alone amount to (kubeflow/mpi-operator#842): Open MPI 5 ignores the
    # ORTE names, finds no hostfile and silently runs both ranks on the launcher; the job still
    # succeeds.
    job = manifest("pi.yaml")
    prrte = [
        "PRTE_MCA_prte_default_hostfile",
        "PRTE_MCA_plm_ssh_args",
        "PRTE_MCA_prte_set_default_slots",
    ]
    launcher = containers(job, "Launcher")[0]
    launcher["command"] = ["env", *(f"--unset={name}" for name in prrte), "mpirun"]
    log = await run_mpijob(kubectl, job)
    assert PI in log
    assert ranks(log) == {"0": "pi-launcher", "1": "pi-launcher"}, log


async def test_a_root_image_with_the_default_sshd_accepts_the_job_keys(
    kubectl: Kubectl, mpi_operator: Path
) -> None:
    # Upstream's own root e2e: no worker command (the operator's `/usr/sbin/sshd -De` with the
    # image's /etc/ssh/sshd_config, port 2222), keys at the default /root/.ssh (mode 0600), mpirun
    # as root.
    job = manifest("pi.yaml")
    del job["spec"]["sshAuthMountPath"]
    for role in ("Launcher", "Worker"):
        containers(job, role)[0].pop("securityContext")
    worker = containers(job, "Worker")[0]
    del worker["command"], worker["args"]
    launcher = containers(job, "Launcher")[0]
    launcher["args"] = ["--allow-run-as-root", *launcher["args"]]
    log = await run_mpijob(kubectl, job)
    assert PI in log, log
    assert sorted(ranks(log).values()) == ["pi-worker-0", "pi-worker-1"], log


@pytest.mark.parametrize("implementation", ["OpenMPI", "MPICH", "Intel"])
async def test_non_root_sshd_on_2222_with_strict_modes_and_a_declared_port(
    implementation: str, kubectl: Kubectl, mpi_operator: Path
) -> None:
    # The platform contract for non-root images: sshd as uid 1000 on 2222 with StrictModes on, the
    # port declared, so the operator's readiness probe means "sshd answers". StrictModes passes
    # because the operator hands sshd a private 0700/0600 copy of the keys, owned by the user.
    job = manifest(MANIFEST[implementation])
    worker = containers(job, "Worker")[0]
    worker["command"], worker["args"] = [*NON_ROOT_SSHD, "-o", "StrictModes=yes"], []
    worker.pop("readinessProbe", None)
    worker["ports"] = [{"name": "ssh", "containerPort": 2222}]
    log = await run_mpijob(kubectl, job)
    assert PI in log, log
    assert sorted(ranks(log).values()) == ["pi-worker-0", "pi-worker-1"], log
    rc, out, err = await kubectl(
        "get", "events", "--field-selector", "reason=SSHPortUnknown", "-o", "name"
    )
    assert (rc, out) == (0, ""), err


@pytest.mark.parametrize("implementation", ["OpenMPI", "MPICH", "Intel"])
async def test_a_worker_whose_sshd_comes_up_late_never_fails_the_job(
    implementation: str, kubectl: Kubectl, mpi_operator: Path
) -> None:
    # No port and no probe: the workers are Ready as soon as their container runs, the launcher
    # starts at once, and its ssh retries (ConnectionAttempts=10, one a second) until sshd answers 4
    # s later.
    job = manifest(MANIFEST[implementation])
    worker = containers(job, "Worker")[0]
    worker["command"] = ["sh", "-c", 'sleep 4; exec "$@"', "sshd", *NON_ROOT_SSHD]
    worker.pop("args", None)
    worker.pop("readinessProbe", None)
    log = await run_mpijob(kubectl, job)
    assert PI in log, log
    assert sorted(ranks(log).values()) == ["pi-worker-0", "pi-worker-1"], log
