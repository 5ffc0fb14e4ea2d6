"""Graceful scale-in: workers above the desired count drain before their pods are deleted.

Deleting a pod that still holds a Horovod rank is the failure path, while a host dropped from the
script leaves at its next commit (docs/architecture.md#the-elastic-state-machine). So a worker at or
above the desired count is first dropped from `discover_hosts.sh` (`pacing.py`), stamped with
`DRAINING_ANNOTATION` in the same step (after the script's write), deleted
`scaleInGracePeriodSeconds` later, and its identity retired. A pod Horovod never saw is deleted at
once; a draining pod wanted again is reused.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from mpi_operator import reasons
from mpi_operator.elastic.decision import PodAnnotationPatch, PodDeletion
from mpi_operator.elastic.hosts import DRAINING_ANNOTATION, WorkerPod
from mpi_operator.elastic.state import Member
from mpi_operator.reasons import Event

WORKER_DRAINING: Final = "WorkerDraining"
WORKER_DRAINED: Final = "WorkerDrained"
WORKER_REUSED: Final = "WorkerReused"
SCALED_IN: Final = "ScaledIn"


def format_since(epoch: float) -> str:
    """RFC 3339 with microseconds, so the grace period is not cut short by rounding."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class ScaleIn:
    drain: list[PodAnnotationPatch] = field(default_factory=list)
    delete: list[PodDeletion] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    """Indices whose current identity is retired (their incarnation must be bumped)."""
    events: list[Event] = field(default_factory=list)
    draining: int = 0
    wait: float | None = None


def plan_scale_in(
    workers: Mapping[int, WorkerPod],
    incarnations: Mapping[int, int],
    *,
    replicas: int,
    listed: Collection[Member],
    removed_now: Collection[Member],
    grace_seconds: float,
    now: float,
    last_change: float | None = None,
    last_removed: Collection[Member] = (),
) -> ScaleIn:
    """Drain stamps, undrains and deletions for workers around the desired count. `last_change` and
    `last_removed`: when the script last changed, and whom that change dropped."""
    out = ScaleIn()
    # Sets: a scale-in of a thousand workers tests each against both.
    listed, removed_now = frozenset(listed), frozenset(removed_now)
    dropped = frozenset(last_removed) if last_change is not None else frozenset()
    for index in sorted(workers):
        worker = workers[index]
        if worker.terminating or worker.incarnation < incarnations.get(index, 0):
            continue  # already going, or superseded (replacement.py deletes those)
        if index < replicas:
            if worker.draining_since is not None and not worker.failed:
                out.drain.append(
                    PodAnnotationPatch(worker.name, worker.uid, {DRAINING_ANNOTATION: None})
                )
                out.events.append(
                    Event(
                        reasons.NORMAL,
                        WORKER_REUSED,
                        f"worker {worker.name} scaled back in before deletion",
                    )
                )
            continue
        if worker.member in removed_now:
            out.drain.append(
                PodAnnotationPatch(
                    worker.name, worker.uid, {DRAINING_ANNOTATION: format_since(now)}
                )
            )
            out.events.append(
                Event(
                    reasons.NORMAL,
                    WORKER_DRAINING,
                    f"worker {worker.name} left host discovery; deleting it in {grace_seconds:g}s",
                )
            )
            out.draining += 1
            out.wait = _earliest(out.wait, grace_seconds)
            continue
        if worker.member in listed:
            continue  # pacing has not taken it out of discovery yet
        since = worker.draining_since
        if since is None and worker.member in dropped and not worker.failed:
            assert last_change is not None
            if now < last_change + grace_seconds:
                # The script dropped it, and its stamp (written after the script) was lost: it
                # drains from the script's change.
                stamp = {DRAINING_ANNOTATION: format_since(last_change)}
                out.drain.append(PodAnnotationPatch(worker.name, worker.uid, stamp))
                out.draining += 1
                out.wait = _earliest(out.wait, last_change + grace_seconds - now)
                continue
        if since is not None and not worker.failed and now < since + grace_seconds:
            out.draining += 1
            out.wait = _earliest(out.wait, since + grace_seconds - now)
            continue
        reason = WORKER_DRAINED if since is not None else SCALED_IN
        out.delete.append(PodDeletion(worker.name, worker.uid, index, reason))
        out.retired.append(index)
        if since is not None:
            out.events.append(
                Event(
                    reasons.NORMAL,
                    WORKER_DRAINED,
                    f"worker {worker.name} deleted after its grace period",
                )
            )
    return out


def _earliest(current: float | None, candidate: float) -> float:
    return candidate if current is None else min(current, candidate)
