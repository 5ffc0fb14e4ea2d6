"""Elastic Horovod, the pure core: which hosts `discover_hosts.sh` lists, when, and what happens to
pods.

No I/O, no asyncio, no clock of its own: the reconciler calls `sync.prepare` with the job, what the
stores hold and `now`, and gets the builders' inputs and the plan's elastic writes back. `sync` is
the entry point, `step` the decision inside it; `hosts` (who may be discovered), `identity` (a host
name per pod incarnation, the blacklist-safe replacement design), `pacing` (one change at a time),
`scalein` (graceful drain), `replacement` (self-healing, the below-min timeout), `losses` (a
disruption or a program failure), `state` (what lives in the API), `decision` (what a step
returns and how it is applied), `launcher_env` (bounds for horovodrun), `launcher_stop` (ending the
launcher Job of a job failed below minReplicas).
"""

from mpi_operator.elastic.decision import (
    ElasticDecision,
    JobFailure,
    PodAnnotationPatch,
    PodDeletion,
)
from mpi_operator.elastic.hosts import DRAINING_ANNOTATION
from mpi_operator.elastic.identity import (
    INCARNATION_ANNOTATION,
    incarnation_annotations,
    worker_host,
    worker_hostname,
)
from mpi_operator.elastic.launcher_env import (
    discovery_revision_annotation,
    launcher_env,
    pod_group_min_member,
    process_bounds,
)
from mpi_operator.elastic.launcher_stop import LauncherStop, launcher_stop
from mpi_operator.elastic.state import (
    STATE_ANNOTATION,
    PublishedState,
    WorkerFailure,
    state_annotations,
    state_from_config_map,
)
from mpi_operator.elastic.step import (
    clamp_replicas,
    effective_replicas,
    elastic_policy,
    elastic_step,
    published_state,
)

__all__ = [
    "DRAINING_ANNOTATION",
    "INCARNATION_ANNOTATION",
    "STATE_ANNOTATION",
    "ElasticDecision",
    "JobFailure",
    "LauncherStop",
    "PodAnnotationPatch",
    "PodDeletion",
    "PublishedState",
    "WorkerFailure",
    "clamp_replicas",
    "discovery_revision_annotation",
    "effective_replicas",
    "elastic_policy",
    "elastic_step",
    "incarnation_annotations",
    "launcher_env",
    "launcher_stop",
    "pod_group_min_member",
    "process_bounds",
    "published_state",
    "state_annotations",
    "state_from_config_map",
    "worker_host",
    "worker_hostname",
]
