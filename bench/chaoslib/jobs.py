"""The MPIJobs of a chaos run: a seeded mix of elastic and static jobs.

Elastic jobs (`elasticPolicy` min..max, workers never restart in place, so the operator replaces
each killed or evicted worker) are scaled between their bounds. Static jobs keep their workers
(restartPolicy OnFailure: the kubelet restarts a killed container in place; an eviction fails the
job, as upstream); some of them have a launcher that exits 0 after `finish_seconds`, so jobs also
finish under chaos and a reverted Succeeded condition would show.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from chaoslib.steps import NS

IMAGE = "mpioperator/mpi-pi:openmpi"
POD_SECONDS = "0.2"
"""kubesim's start and ready delay of every pod (annotations), short so a run sees many
lifecycles."""


@dataclass(frozen=True)
class JobPlan:
    name: str
    elastic: bool
    workers: int
    min_replicas: int
    max_replicas: int
    finish_seconds: float | None = None
    """A static job's launcher exits 0 after this long (None: it runs until deleted)."""

    def manifest(self) -> dict[str, Any]:
        fast = {"kubesim/start-seconds": POD_SECONDS, "kubesim/ready-seconds": POD_SECONDS}
        launcher_notes = dict(fast)
        if self.finish_seconds is not None:
            launcher_notes |= {
                "kubesim/run-seconds": f"{self.finish_seconds:.1f}",
                "kubesim/exit-code": "0",
            }

        def template(annotations: dict[str, str], role: str) -> dict[str, Any]:
            return {
                "metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": role, "image": IMAGE}]},
            }

        spec: dict[str, Any] = {
            "launcherCreationPolicy": "AtStartup",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(launcher_notes, "launcher")},
                "Worker": {
                    "replicas": self.workers,
                    "restartPolicy": "Never" if self.elastic else "OnFailure",
                    "template": template(fast, "worker"),
                },
            },
        }
        if self.elastic:
            spec["elasticPolicy"] = {
                "minReplicas": self.min_replicas,
                "maxReplicas": self.max_replicas,
                "scaleInGracePeriodSeconds": 1,
                "settleSeconds": 0,
                # every kill and eviction is replaced: the budget is not tested
                "maxReplacements": 10_000,
            }
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": self.name, "namespace": NS},
            "spec": spec,
        }


def plan_jobs(
    rng: random.Random, count: int, *, finish_range: tuple[float, float]
) -> list[JobPlan]:
    """`count` jobs, about 60 % elastic (1..2 to 4..5 workers), the rest static (1..3 workers); a
    third of the static ones finish after a time drawn from `finish_range` seconds."""
    plans = []
    for i in range(count):
        name = f"chaos-{i:03d}"
        if rng.random() < 0.6:
            low, high = rng.randint(1, 2), rng.randint(4, 5)
            plans.append(JobPlan(name, True, rng.randint(low, high), low, high))
        else:
            finish = rng.uniform(*finish_range) if rng.random() < 1 / 3 else None
            workers = rng.randint(1, 3)
            plans.append(JobPlan(name, False, workers, 1, 4, finish))
    return plans
