"""Self-healing of elastic jobs: lost workers replaced under a new identity.

Horovod blacklists a lost worker's host name for good (`identity.py`), so such a worker leaves
discovery at once (`pacing.py`), its index's incarnation is bumped in the state before its pod is
deleted, and the planner creates the replacement under the next host name; an older incarnation's
pod still around is deleted as superseded. Only a program failure uses up `maxReplacements`: past
it, a failed pod stays (with its logs) and is only recorded. A worker the cluster took
(`losses.py`) is always replaced and counted apart. Also the below-minReplicas clock
(`check_below_min`): the job fails only after `belowMinTimeoutSeconds` under the minimum, counted
once it has reached it. Static jobs never come here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from mpi_operator import reasons
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.elastic import losses
from mpi_operator.elastic.decision import JobFailure, PodDeletion
from mpi_operator.elastic.hosts import WorkerPod
from mpi_operator.elastic.identity import worker_host, worker_hostname
from mpi_operator.elastic.state import MAX_FAILURES_KEPT, PublishedState, WorkerFailure
from mpi_operator.reasons import Event

WORKER_FAILED: Final = "WorkerFailed"
WORKER_DISRUPTED: Final = "WorkerDisrupted"
WORKER_REPLACED: Final = "WorkerReplaced"
REPLACEMENT_BUDGET_EXHAUSTED: Final = "ReplacementBudgetExhausted"
BELOW_MIN_REPLICAS: Final = "BelowMinReplicas"
"""Event when ready workers drop below minReplicas, and the Failed condition's reason at the
timeout."""
SUPERSEDED: Final = "Superseded"
STUCK_TERMINATING: Final = "StuckTerminating"
STUCK_SECONDS: Final = 30.0
"""How long past its deletion deadline a replaced pod may stay Terminating before it is
force-deleted: its kubelet (a dead node's) is not going to finish, and it holds the pod name."""


@dataclass
class Replacements:
    """The outcome of `plan_replacements` (mutable only while it is built)."""

    incarnations: dict[int, int]
    replacements: int
    disruptions: int
    failures: list[WorkerFailure]
    replace: list[PodDeletion] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    wait: float | None = None
    """Seconds until a replaced pod stuck Terminating is to be force-deleted."""


def _record(
    out: Replacements,
    job: MPIJob,
    index: int,
    incarnation: int,
    reason: str,
    code: int | None,
    now: float,
    *,
    disruption: bool = False,
) -> WorkerFailure | None:
    """Remember a failure once per identity; the new record, or None when it was known."""
    if any(f.index == index and f.incarnation == incarnation for f in out.failures):
        return None
    failure = WorkerFailure(
        index=index,
        incarnation=incarnation,
        pod=naming.worker_name(job, index),
        host=worker_hostname(job, index, incarnation),
        reason=reason or "Unknown",
        exit_code=code,
        at=now,
        disruption=disruption,
    )
    out.failures.append(failure)
    del out.failures[:-MAX_FAILURES_KEPT]
    return failure


def plan_replacements(
    job: MPIJob,
    workers: Mapping[int, WorkerPod],
    state: PublishedState,
    *,
    replicas: int,
    max_replacements: int,
    now: float,
    cluster_domain: str = "",
) -> Replacements:
    """Incarnation bumps, replacement deletions and failure records for this step."""
    incarnations = dict(state.incarnations)
    for seen in workers.values():
        # A pod ahead of the stored counter (the annotation was lost): never go back to older names.
        if seen.incarnation > incarnations.get(seen.index, 0):
            incarnations[seen.index] = seen.incarnation
    out = Replacements(incarnations, state.replacements, state.disruptions, list(state.failures))
    listed = set(state.members)
    for index in sorted({*workers, *(i for i, _ in listed)}):
        current = incarnations.get(index, 0)
        worker = workers.get(index)
        if worker is None:
            if (index, current) in listed:
                # Gone while Horovod knew it: that name may be blacklisted, never hand it out again.
                incarnations[index] = current + 1
                if index < replicas:
                    _lost(out, job, index, current, losses.DELETED, None, now, cluster_domain)
            continue
        if worker.incarnation < current:
            if not worker.terminating:
                out.replace.append(PodDeletion(worker.name, worker.uid, index, SUPERSEDED))
            else:
                _force_if_stuck(out, worker, now)
            continue
        if index >= replicas:
            if worker.terminating:
                incarnations[index] = (
                    current + 1
                )  # deleted under us while draining: retire its name too
            continue  # failed ones above the desired count are scale-in's to delete
        if not (worker.failed or worker.terminating):
            continue
        loss = worker.loss
        reason = loss if loss is not None else worker.failure_reason
        code = worker.exit_code if worker.failed else None
        if worker.terminating or loss is not None or out.replacements < max_replacements:
            incarnations[index] = current + 1
            _lost(out, job, index, current, reason, code, now, cluster_domain, disrupted=loss)
            if not worker.terminating:
                out.replace.append(PodDeletion(worker.name, worker.uid, index, reason))
            else:
                _force_if_stuck(out, worker, now)
        elif (new := _record(out, job, index, current, reason, code, now)) is not None:
            out.events.append(
                Event(
                    reasons.WARNING,
                    REPLACEMENT_BUDGET_EXHAUSTED,
                    f"worker {new.describe()}; not replaced: maxReplacements ({max_replacements}) "
                    "used up",
                )
            )
    return out


def _force_if_stuck(out: Replacements, worker: WorkerPod, now: float) -> None:
    """Force-delete a replaced pod its kubelet has not finished deleting `STUCK_SECONDS` past the
    deadline, so its successor can take the pod name; else come back then. Safe because its host
    name is retired: Horovod will not use it again, and the successor has another."""
    if worker.deletion_deadline is None:
        return
    due = worker.deletion_deadline + STUCK_SECONDS
    if now >= due:
        out.replace.append(
            PodDeletion(worker.name, worker.uid, worker.index, STUCK_TERMINATING, force=True)
        )
    else:
        out.wait = min(due - now, out.wait if out.wait is not None else due - now)


def _lost(
    out: Replacements,
    job: MPIJob,
    index: int,
    incarnation: int,
    reason: str,
    code: int | None,
    now: float,
    cluster_domain: str,
    *,
    disrupted: str | None = losses.DELETED,
) -> None:
    """Record a worker replaced under its next host name: a disruption unless `disrupted` is None
    (a program failure, which uses up one replacement), and its event."""
    disruption = disrupted is not None
    _record(out, job, index, incarnation, reason, code, now, disruption=disruption)
    failure = WorkerFailure(
        index,
        incarnation,
        naming.worker_name(job, index),
        worker_hostname(job, index, incarnation),
        reason,
        code,
        disruption=disruption,
    )
    new_host = worker_host(job, index, incarnation + 1, cluster_domain)
    if disruption:
        out.disruptions += 1
        out.events.append(
            Event(
                reasons.WARNING,
                WORKER_DISRUPTED,
                f"worker {failure.describe()}; replacing it as host {new_host} (disruption "
                f"{out.disruptions}, not counted against maxReplacements)",
            )
        )
        return
    out.replacements += 1
    out.events.append(
        Event(
            reasons.WARNING,
            WORKER_FAILED,
            f"worker {failure.describe()}; replacing it as host {new_host} (replacement "
            f"{out.replacements})",
        )
    )


@dataclass(frozen=True)
class BelowMin:
    """The below-minReplicas clock after this step."""

    reached_min: bool
    since: float | None
    fail: JobFailure | None = None
    wait: float | None = None
    started: bool = False


def check_below_min(
    ready: int,
    *,
    min_replicas: int,
    timeout_seconds: float,
    state: PublishedState,
    failures: list[WorkerFailure],
    now: float,
) -> BelowMin:
    """Start, keep or clear the clock; a JobFailure once it has run `timeout_seconds`."""
    if ready >= min_replicas:
        return BelowMin(reached_min=True, since=None)
    if not state.reached_min:
        return BelowMin(reached_min=False, since=None)
    since = state.below_min_since if state.below_min_since is not None else now
    deadline = since + timeout_seconds
    if now < deadline:
        return BelowMin(True, since, wait=deadline - now, started=state.below_min_since is None)
    named = "; ".join(f.describe() for f in failures) or "none recorded"
    message = (
        f"only {ready} of minReplicas {min_replicas} workers ready for {timeout_seconds:g}s; "
        f"lost workers: {named}"
    )
    return BelowMin(True, since, fail=JobFailure(BELOW_MIN_REPLICAS, message))
