"""The MPIJobs the operator benchmarks create: elastic Horovod jobs and plain (static) MPI jobs."""

from __future__ import annotations

from typing import Any

from opbench_processes import NS


def _template(role: str, image: str, command: list[str]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": role, "image": image, "command": command}]}}


def _mpijob(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def elastic_mpijob(
    name: str,
    *,
    workers: int = 2,
    min_replicas: int = 1,
    max_replicas: int = 4,
    settle: int,
    grace: int,
) -> dict[str, Any]:
    """An elastic Horovod job starting with `workers` workers, one slot each."""
    image = "horovod/horovod:0.28.1"
    launcher = [
        "horovodrun",
        "-np",
        str(workers),
        "--min-np",
        str(min_replicas),
        "--max-np",
        str(max_replicas),
    ]
    launcher += ["--host-discovery-script", "/etc/mpi/discover_hosts.sh", "python", "train.py"]
    return _mpijob(
        name,
        {
            "slotsPerWorker": 1,
            "elasticPolicy": {
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "settleSeconds": settle,
                "scaleInGracePeriodSeconds": grace,
            },
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template("launcher", image, launcher)},
                "Worker": {
                    "replicas": workers,
                    "template": _template("worker", image, ["/usr/sbin/sshd", "-De"]),
                },
            },
        },
    )


def static_mpijob(name: str, workers: int) -> dict[str, Any]:
    """A plain (not elastic) MPI job: a launcher and `workers` workers, one slot each."""
    image = "mpioperator/mpi-pi:openmpi"
    return _mpijob(
        name,
        {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": _template("launcher", image, ["mpirun", "/home/mpiuser/pi"]),
                },
                "Worker": {
                    "replicas": workers,
                    "template": _template("worker", image, ["/usr/sbin/sshd", "-De"]),
                },
            },
        },
    )
