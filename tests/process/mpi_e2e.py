"""Running MPIJobs end to end through the process runtime: apply, wait, read the launcher's
output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kubesim.testing import Kubectl

MANIFESTS = Path(__file__).parent / "manifests"
PI = "pi is approximately 3.1410376000000002"
"""What upstream's pi program prints with 2 ranks (deterministic: each rank seeds its generator)."""


def manifest(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((MANIFESTS / name).read_text())
    assert isinstance(doc, dict)
    return doc


def containers(job: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"]  # type: ignore[no-any-return]


async def run_mpijob(kubectl: Kubectl, job: dict[str, Any] | Path, *, within: int = 90) -> str:
    """Applies the MPIJob, waits until it succeeds, returns the launcher's log (diagnostics on
    failure)."""
    doc = manifest(job.name) if isinstance(job, Path) else job
    rc, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    name = doc["metadata"]["name"]
    assert rc == 0, err
    rc, _, err = await kubectl(
        "wait", "--for=condition=Succeeded", f"mpijobs.v2beta1.kubeflow.org/{name}",
        f"--timeout={within}s", limit=within + 30,
    )  # fmt: skip
    if rc != 0:
        report = [err]
        for args in (
            ("get", "pods", "-o", "wide"),
            ("logs", f"job/{name}-launcher", "--all-containers"),
            ("logs", f"{name}-worker-0", "--all-containers"),
            ("get", f"mpijobs.v2beta1.kubeflow.org/{name}", "-o", "yaml"),
            ("get", "events"),
        ):
            _, out, more = await kubectl(*args)
            report.append(f"$ kubectl {' '.join(args)}\n{out}{more}")
        raise AssertionError("\n".join(report))
    rc, out, err = await kubectl("logs", f"job/{name}-launcher")
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
