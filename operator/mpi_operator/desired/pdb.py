"""The workers' PodDisruptionBudget `<job>-workers` (policy/v1): voluntary evictions (the Eviction
API: `kubectl drain`, cluster autoscalers) stop at the number of workers the job cannot do without.

`spec.disruptionBudgetPolicy` decides who gets one: `Auto`, elastic jobs (`minAvailable:
minReplicas`, Horovod re-forms above it); `Always`, static jobs too (`minAvailable`: every worker,
as a static job fails when it loses one); `Never`, none. None while suspended or without workers.
`unhealthyPodEvictionPolicy: AlwaysAllow`: a worker that is not Ready does no work Horovod can
use, so evicting it never costs the job anything and must not block a drain.
"""

from __future__ import annotations

from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, naming
from mpi_operator.objects import KubeObject

API_VERSION: Final = "policy/v1"
KIND: Final = "PodDisruptionBudget"
ALWAYS_ALLOW: Final = "AlwaysAllow"


def min_available(job: MPIJob) -> int | None:
    """The workers the budget keeps, or None when the job gets no budget."""
    policy = job.spec.disruption_budget_policy or c.DEFAULT_DISRUPTION_BUDGET_POLICY
    workers = config.worker_replicas(job)
    if policy == c.DISRUPTION_BUDGET_NEVER or job.spec.run_policy.suspend or workers < 1:
        return None
    elastic = job.spec.elastic_policy
    if elastic is not None:
        return min(elastic.min_replicas, workers)
    return workers if policy == c.DISRUPTION_BUDGET_ALWAYS else None


def build_pdb(job: MPIJob) -> KubeObject | None:
    """The budget `job` should have, or None (`min_available`)."""
    floor = min_available(job)
    if floor is None:
        return None
    spec: KubeObject = {
        "minAvailable": floor,
        "selector": {"matchLabels": naming.worker_selector(job)},
        "unhealthyPodEvictionPolicy": ALWAYS_ALLOW,
    }
    return naming.owned_object(job, API_VERSION, KIND, naming.pdb_name(job), spec=spec)
