"""Upstream's pi MPIJobs, applied unchanged with the real kubectl, run by real sshd and real MPIs.

kubesim runs the pods as real processes (the process runtime) with the stand-in images of
`mpi_images.py`; the operator runs in its own process (`mpi-operator run`), as on a cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesim.testing import Kubectl

from .mpi_e2e import MANIFESTS, PI, manifest, ranks, run_mpijob

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(300)]


@pytest.mark.parametrize("name", ["pi.yaml", "pi-mpich.yaml", "pi-intel.yaml"])
async def test_upstream_pi_succeeds_with_a_rank_on_every_worker(
    name: str, kubectl: Kubectl, mpi_operator: Path
) -> None:
    log = await run_mpijob(kubectl, MANIFESTS / name)
    assert PI in log, log
    assert "Workers: 2" in log
    assert sorted(ranks(log).items()) == [("0", "pi-worker-0"), ("1", "pi-worker-1")], log


async def test_pi_without_a_declared_ssh_port_warns_once_and_still_runs(
    kubectl: Kubectl, mpi_operator: Path
) -> None:
    # Upstream's pi.yaml declares no port: the operator cannot know sshd's (2222, from the image's
    # config), so it adds no probe instead of one on a guessed port, and says how to declare it.
    log = await run_mpijob(kubectl, MANIFESTS / "pi.yaml")
    assert PI in log
    rc, out, err = await kubectl(
        "get",
        "events",
        "--field-selector",
        "reason=SSHPortUnknown",
        "-o",
        "jsonpath={.items[*].count}",
    )
    assert (rc, out) == (0, "1"), err


@pytest.mark.parametrize("name", ["pi.yaml", "pi-mpich.yaml", "pi-intel.yaml"])
async def test_run_launcher_as_worker_puts_a_rank_on_the_launcher_too(
    name: str, kubectl: Kubectl, mpi_operator: Path
) -> None:
    job = manifest(name)
    job["spec"]["runLauncherAsWorker"] = True
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    argv = [*(launcher.get("command") or []), *(launcher.get("args") or [])]
    argv[argv.index("-n") + 1] = "3"
    launcher["command"], launcher["args"] = argv[:1], argv[1:]
    if name != "pi.yaml":
        # Keep the image's entrypoint (the MPICH and Intel images look up the hosts first).
        launcher.pop("command")
        launcher["args"] = argv
    log = await run_mpijob(kubectl, job)
    assert "Workers: 3" in log, log
    assert sorted(ranks(log).values()) == ["pi-launcher", "pi-worker-0", "pi-worker-1"], log
