"""The launcher's elastic bounds, the PodGroup's gang size, and the discovery refresh marker.

`horovodrun` counts processes while the MPIJob counts workers, and users get that arithmetic wrong
by hand, so the launcher gets the computed values: `MPIJOB_MIN_NP`/`MPIJOB_MAX_NP` (the bounds times
the slots, plus the launcher's slots when it is a worker), `MPIJOB_MIN_REPLICAS`,
`MPIJOB_MAX_REPLICAS`, `MPIJOB_SLOTS_PER_WORKER` and `MPIJOB_DISCOVERY_SCRIPT`. The gang is
minReplicas (+ a launcher created at startup). `discovery_revision_annotation` goes on the
launcher pod after each change of `discover_hosts.sh`, so the kubelet refreshes the mounted script
at once rather than at its next periodic sync.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from mpi_discovery import hostfile
from mpi_operator.api.defaults import launcher_slots, slots_per_worker
from mpi_operator.api.models import ElasticPolicy, MPIJob
from mpi_operator.desired import podgroup
from mpi_operator.desired.config import DISCOVER_HOSTS_KEY
from mpi_operator.desired.launcher import CONFIG_MOUNT_PATH
from mpi_operator.objects import KubeObject

MIN_NP_ENV: Final = "MPIJOB_MIN_NP"
MAX_NP_ENV: Final = "MPIJOB_MAX_NP"
MIN_REPLICAS_ENV: Final = "MPIJOB_MIN_REPLICAS"
MAX_REPLICAS_ENV: Final = "MPIJOB_MAX_REPLICAS"
SLOTS_ENV: Final = "MPIJOB_SLOTS_PER_WORKER"
DISCOVERY_SCRIPT_ENV: Final = "MPIJOB_DISCOVERY_SCRIPT"
DISCOVERY_SCRIPT_PATH: Final = f"{CONFIG_MOUNT_PATH}/{DISCOVER_HOSTS_KEY}"
DISCOVERY_REVISION_ANNOTATION: Final = "mpi-operator.kubeflow.org/discovery-revision"
"""On the launcher pod: a digest of what `discover_hosts.sh` prints; it changes with every
change."""


def process_bounds(job: MPIJob, policy: ElasticPolicy) -> tuple[int, int]:
    """`(min_np, max_np)` in processes for the policy's worker bounds."""
    slots = slots_per_worker(job.spec)
    extra = launcher_slots(job.spec) if job.spec.run_launcher_as_worker else 0
    return policy.min_replicas * slots + extra, policy.max_replicas * slots + extra


def launcher_env(job: MPIJob, policy: ElasticPolicy) -> list[KubeObject]:
    """The variables appended to the launcher's `containers[0].env` of an elastic job, in this
    order."""
    min_np, max_np = process_bounds(job, policy)
    pairs = [
        (MIN_NP_ENV, min_np),
        (MAX_NP_ENV, max_np),
        (MIN_REPLICAS_ENV, policy.min_replicas),
        (MAX_REPLICAS_ENV, policy.max_replicas),
        (SLOTS_ENV, slots_per_worker(job.spec)),
        (DISCOVERY_SCRIPT_ENV, DISCOVERY_SCRIPT_PATH),
    ]
    return [{"name": name, "value": str(value)} for name, value in pairs]


def pod_group_min_member(job: MPIJob, policy: ElasticPolicy) -> int:
    """PodGroup `minMember` of an elastic job: minReplicas workers, + the launcher when it is
    created with them (`desired.podgroup.launcher_in_gang`)."""
    return policy.min_replicas + (1 if podgroup.launcher_in_gang(job) else 0)


def discovery_revision(discovered: Sequence[tuple[str, int]]) -> str:
    """A short digest of the script's output: equal host lists give equal revisions."""
    return hashlib.sha256(hostfile.render_discovery_output(discovered).encode()).hexdigest()[:16]


def discovery_revision_annotation(discovered: Sequence[tuple[str, int]]) -> dict[str, str]:
    """The launcher pod annotation that makes the kubelet re-read `discover_hosts.sh` now."""
    return {DISCOVERY_REVISION_ANNOTATION: discovery_revision(discovered)}
