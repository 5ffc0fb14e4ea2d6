"""What one elastic step decides: `ElasticDecision` and the pod writes it asks for.

`sync.py` turns a decision into plan actions, each in its phase (`planning.Phase`): a write goes
out only after the ones before it succeeded, so every crash window between two is harmless:

1. DISCOVERY: the ConfigMap: `discover_hosts.sh` from `discovered`, plus the published state;
2. ANNOUNCE: the launcher pod touched (`launcher_env.discovery_revision_annotation`) when it lags;
3. DRAIN: the `drain` patches (merge-patch the pod annotations; a None value deletes the key);
4. RELEASE: `replace` and `delete`: those pods deleted, preconditioned on their uid;
5. WORKLOAD: missing worker pods created with `identity.worker_hostname(job, i, incarnation)`;
6. then `status` into the MPIJob status, `events` recorded, and `fail` set as the Failed condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mpi_operator.elastic.state import PublishedState
from mpi_operator.reasons import Event


@dataclass(frozen=True)
class PodAnnotationPatch:
    """Merge-patch `metadata.annotations` of worker pod `name` (None removes a key)."""

    name: str
    uid: str | None
    annotations: Mapping[str, str | None]

    def merge_patch(self) -> dict[str, Any]:
        return {"metadata": {"annotations": dict(self.annotations)}}


@dataclass(frozen=True)
class PodDeletion:
    """Delete worker pod `name` (precondition: `uid`), and why."""

    name: str
    uid: str | None
    index: int
    reason: str
    force: bool = False
    """With grace period 0: a replaced pod whose kubelet never finished its deletion."""


@dataclass(frozen=True)
class JobFailure:
    """The job must fail: the Failed condition's reason and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class ElasticDecision:
    """Everything one `elastic_step` decided; see the module docstring for how it is applied."""

    discovered: list[tuple[str, int]]
    publish: PublishedState
    drain: list[PodAnnotationPatch] = field(default_factory=list)
    delete: list[PodDeletion] = field(default_factory=list)
    replace: list[PodDeletion] = field(default_factory=list)
    requeue_after: float | None = None
    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    fail: JobFailure | None = None
    discovery_changed: bool = False
    urgent: bool = False
    """The script drops hosts that can no longer run: its write and the launcher touch skip the
    client's request queue, since Horovod would otherwise keep trying a dead host while other jobs'
    writes go first."""

    @property
    def incarnations(self) -> Mapping[int, int]:
        """Index -> incarnation for the worker pods the desired builders create (absent = 0)."""
        return self.publish.incarnations
