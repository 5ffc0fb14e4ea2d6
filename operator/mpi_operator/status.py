"""Pure status: an MPIJob and its observed children -> the status to store and the events to record.

A port of upstream's `syncHandler` status steps and `updateMPIJobStatus` with its condition engine
(`conditions`), in the status subresource's wire format (camelCase, RFC 3339 seconds, zero counts
omitted). Additions: `observedGeneration`, for workers `ready` and `selector` (scale subresource,
HPA), and for elastic jobs `elastic` (filled by the reconciler from the elastic decision).

Deliberate departures from upstream, all so that a converged job makes no writes: events
(MPIJobRunning, MPIJobSucceeded, the failure and eviction warnings) are recorded when their
condition changes, not on every sync; a succeeded launcher Job without a completionTime completes
the MPIJob at `now` instead of leaving it unfinished forever. The clock is injected (`now`); no I/O.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from mpi_operator import reasons
from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.conditions import Status, get_condition, is_finished, set_condition
from mpi_operator.desired import config, naming
from mpi_operator.desired.naming import is_controlled_by
from mpi_operator.objects import (
    POD_FAILED,
    POD_RUNNING,
    POD_SUCCEEDED,
    is_job_failed,
    is_job_finished,
    is_job_succeeded,
    is_pod_ready,
    job_condition,
    metadata,
    name_of,
    parse_time,
    pod_phase,
    pod_status_field,
    status_field,
    unschedulable_message,
)
from mpi_operator.planning.observed import Observed, launcher_pods_of, workers_by_index
from mpi_operator.reasons import Event


class JobCounter(StrEnum):
    """A job transition the job metrics count
    (`mpi_operator_jobs_{created,successful,failed}_total`)."""

    CREATED = "created"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


_TIME_FIELDS: Final = ("startTime", "completionTime", "lastReconcileTime")
_COUNT_FIELDS: Final = ("active", "succeeded", "failed", "ready")
_ELASTIC_FIELDS: Final = (
    "desired",
    "ready",
    "discovered",
    "draining",
    "replacements",
    "disruptions",
    "minReplicas",
    "maxReplicas",
)
_CONDITION_KEYS: Final = (
    "type",
    "status",
    "reason",
    "message",
    "lastUpdateTime",
    "lastTransitionTime",
)


@dataclass(frozen=True)
class StatusUpdate:
    """The status to store, whether it differs from the stored one, and what happened on the way."""

    status: Status
    changed: bool
    events: tuple[Event, ...] = ()
    counters: tuple[JobCounter, ...] = ()
    """Transitions to count in the job metrics (created / succeeded / failed totals)."""
    pending_workers: int = 0
    """Workers the scheduler could not place (`mpi_operator_job_pending_workers`)."""


# --- wire format ---------------------------------------------------------------------------------


def format_time(value: datetime) -> str:
    """metav1.Time's JSON: RFC 3339 in UTC at second precision (a naive datetime is taken as
    UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _normalized_time(value: Any) -> str | None:
    parsed = parse_time(value)
    return format_time(parsed) if parsed is not None else None


_time_text = functools.lru_cache(maxsize=1024)(_normalized_time)
"""`_normalized_time` of a string, remembered: every sync normalizes the same stored times again."""


def _time(value: Any) -> str | None:
    return _time_text(value) if type(value) is str else _normalized_time(value)


def _replica_status(raw: Mapping[str, Any]) -> Status:
    out: Status = {}
    for key in _COUNT_FIELDS:
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value != 0:
            out[key] = value
    if isinstance(raw.get("labelSelector"), Mapping):
        out["labelSelector"] = copy.deepcopy(dict(raw["labelSelector"]))
    if isinstance(raw.get("selector"), str) and raw["selector"]:
        out["selector"] = raw["selector"]
    return out


def normalize_status(raw: Mapping[str, Any] | None) -> Status:
    """The fields of a stored status this operator owns, in one canonical shape.

    Times become second-precision UTC strings, zero counts and empty values are dropped (Go's
    omitempty), unknown fields are ignored; so equal situations give equal dicts.
    """
    out: Status = {}
    if not raw:
        return out
    conditions = []
    for cond in raw.get("conditions") or []:
        if not isinstance(cond, Mapping) or not cond.get("type"):
            continue
        item = {key: cond.get(key) for key in _CONDITION_KEYS}
        for key in ("lastUpdateTime", "lastTransitionTime"):
            item[key] = _time(item[key])
        conditions.append({k: v for k, v in item.items() if v not in (None, "")})
    if conditions:
        out["conditions"] = conditions
    replica_statuses = raw.get("replicaStatuses")
    if isinstance(replica_statuses, Mapping):
        out["replicaStatuses"] = {
            str(key): _replica_status(value)
            for key, value in replica_statuses.items()
            if isinstance(value, Mapping)
        }
    for key in _TIME_FIELDS:
        if (value := _time(raw.get(key))) is not None:
            out[key] = value
    generation = raw.get("observedGeneration")
    if isinstance(generation, int) and not isinstance(generation, bool):
        out["observedGeneration"] = generation
    elastic = raw.get("elastic")
    if isinstance(elastic, Mapping):
        # Unlike replica counts, zeros are kept: "0 discovered" is news for an elastic job.
        out["elastic"] = {
            key: value
            for key, value in elastic.items()
            if key in _ELASTIC_FIELDS and isinstance(value, int) and not isinstance(value, bool)
        }
        losses = elastic.get("losses")
        if isinstance(losses, list) and losses:
            out["elastic"]["losses"] = [
                {k: _time(v) if k == "time" else v for k, v in loss.items() if v is not None}
                for loss in losses
                if isinstance(loss, Mapping)
            ]
    return out


def current_status(job: MPIJob) -> Status:
    """The job's stored status in `normalize_status` form."""
    if job.status is None:
        return {}
    return normalize_status(job.status.model_dump(by_alias=True, exclude_none=True, mode="json"))


def _comparable(status: Mapping[str, Any] | None) -> Status:
    normalized = normalize_status(status)
    # conditions is a list-map keyed by type: order carries no meaning.
    normalized["conditions"] = {cond["type"]: cond for cond in normalized.get("conditions", [])}
    return normalized


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether writing `new` over `old` would change anything this operator owns."""
    return _comparable(old) != _comparable(new)


_PROGRESS_COUNTS: Final = ("active", "ready", "succeeded")


def _without_progress(status: Status) -> Status:
    out = dict(status)
    out["replicaStatuses"] = {
        role: {k: v for k, v in counts.items() if k not in _PROGRESS_COUNTS}
        for role, counts in (status.get("replicaStatuses") or {}).items()
    }
    out["conditions"] = {
        kind: cond
        for kind, cond in (status.get("conditions") or {}).items()
        if not (kind == c.CONDITION_RUNNING and cond.get("status") == "True")
    }
    return out


def progress_only(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether `new` differs from `old` only by a starting job's progress: the active, ready and
    succeeded counts, and Running turning True (`planning.progress` says why that may wait)."""
    before, after = _comparable(old), _comparable(new)
    if before == after:
        return False
    if c.CONDITION_RUNNING in before["conditions"] and before["conditions"].get(
        c.CONDITION_RUNNING
    ) != after["conditions"].get(c.CONDITION_RUNNING):
        return False  # Running changed after it was set: suspended, finished, ...
    return _without_progress(before) == _without_progress(after)


def status_merge_patch(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *, resource_version: str | None = None
) -> dict[str, Any]:
    """An RFC 7386 merge patch of the MPIJob turning status `old` into `new`.

    Removed keys become null (a plain `{"Worker": {}}` would leave the old counts in place, since
    merge patches merge objects); lists are replaced whole. With `resource_version`, the patch only
    applies to that version of the object (409 Conflict otherwise), like upstream's UpdateStatus.
    """
    patch: dict[str, Any] = {"status": _merge_diff(normalize_status(old), normalize_status(new))}
    if resource_version is not None:
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


def _merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    diff: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            if sub := _merge_diff(before, value):
                diff[key] = sub
        elif key not in old or before != value:
            diff[key] = copy.deepcopy(value)
    return diff


# --- compute -------------------------------------------------------------------------------------


def worker_selector(job: MPIJob) -> str:
    """The worker pods' label selector, serialized as `labels.Set.String()` does (sorted by key)."""
    return ",".join(f"{key}={value}" for key, value in sorted(naming.worker_selector(job).items()))


class _Sync:
    """The status steps of one sync, accumulating events and metric transitions."""

    def __init__(self, job: MPIJob, now: datetime) -> None:
        self.job = job
        self.now = format_time(now)
        self.old = current_status(job)
        self.status: Status = copy.deepcopy(self.old)
        self.events: list[Event] = []
        self.counters: list[JobCounter] = []
        self.pending_workers = 0

    def result(self) -> StatusUpdate:
        return StatusUpdate(
            status=self.status,
            changed=status_changed(self.old, self.status),
            events=tuple(self.events),
            counters=tuple(self.counters),
            pending_workers=self.pending_workers,
        )

    def condition(
        self, condition_type: str, value: c.ConditionStatus, reason: str, message: str
    ) -> bool:
        return set_condition(self.status, condition_type, value, reason, message, self.now)

    def event(self, event_type: reasons.EventType, reason: str, message: str) -> None:
        self.events.append(Event(event_type, reason, message))

    @property
    def replica_statuses(self) -> Status:
        return self.status.setdefault("replicaStatuses", {})  # type: ignore[no-any-return]

    def launcher(self, launcher: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
        """Launcher counts and the terminal conditions; returns the number of Running launcher
        pods."""
        job, status = self.job, self.status
        running = sum(1 for pod in pods if pod_phase(pod) == POD_RUNNING)
        counts: Status = {}
        failed = status_field(launcher, "failed")
        if isinstance(failed, int) and not isinstance(failed, bool) and failed > 0:
            counts["failed"] = failed
        if is_job_succeeded(launcher):
            counts["succeeded"] = 1
            message = reasons.succeeded_message(job.namespace, job.name)
            if status.get("completionTime") is None:
                status["completionTime"] = (
                    _time(status_field(launcher, "completionTime")) or self.now
                )
            if self.condition(c.CONDITION_SUCCEEDED, "True", reasons.MPIJOB_SUCCEEDED, message):
                self.event(reasons.NORMAL, reasons.MPIJOB_SUCCEEDED, message)
                self.counters.append(JobCounter.SUCCEEDED)
        elif is_job_failed(launcher):
            reason, message = failure(job, launcher, pods)
            if status.get("completionTime") is None:
                status["completionTime"] = self.now
            if self.condition(c.CONDITION_FAILED, "True", reason, message):
                self.event(reasons.WARNING, reason, message)
                self.counters.append(JobCounter.FAILED)
        elif running:
            counts["active"] = running
        self.replica_statuses[c.REPLICA_LAUNCHER] = counts
        return running

    def workers(
        self, pods: Sequence[Mapping[str, Any]], expected: int, *, fail_on_eviction: bool
    ) -> int:
        """Worker counts and the eviction condition; returns the number of Running workers."""
        counts = dict.fromkeys(_COUNT_FIELDS, 0)
        evicted = 0
        for pod in pods:
            phase = pod_phase(pod)
            if phase == POD_FAILED:
                counts["failed"] += 1
                evicted += pod_status_field(pod, "reason") == reasons.EVICTED_POD_REASON
            elif phase == POD_SUCCEEDED:
                counts["succeeded"] += 1
            elif phase == POD_RUNNING:
                counts["active"] += 1
                counts["ready"] += is_pod_ready(pod)
        worker: Status = {key: value for key, value in counts.items() if value}
        worker["selector"] = worker_selector(self.job)
        self.replica_statuses[c.REPLICA_WORKER] = worker
        if evicted and fail_on_eviction:
            message = reasons.evicted_message(evicted, expected)
            if self.condition(c.CONDITION_FAILED, "True", reasons.MPIJOB_EVICTED, message):
                self.event(reasons.WARNING, reasons.MPIJOB_EVICTED, message)
        return counts["active"]

    def pending(self, pods: Sequence[Mapping[str, Any]], expected: int) -> None:
        """The WorkersPending condition from the workers (in index order) the scheduler could not
        place. Unlike `set_condition`, a new message is news here (the count or the scheduler's
        words changed): the condition and its Warning are renewed, once per change, never per
        sync. The condition goes once every worker is placed."""
        waiting = [
            (name_of(pod), said) for pod in pods if (said := unschedulable_message(pod)) is not None
        ]
        self.pending_workers = len(waiting)
        conditions = self.status.get("conditions", [])
        current = get_condition(self.status, c.CONDITION_WORKERS_PENDING)
        others = [x for x in conditions if x.get("type") != c.CONDITION_WORKERS_PENDING]
        if not waiting:
            if current is not None:
                self.status["conditions"] = others
            return
        pod, said = waiting[0]
        message = reasons.workers_pending_message(len(waiting), expected, pod, said)
        if current is not None and current.get("message") == message:
            return
        since = current.get("lastTransitionTime") if current is not None else None
        condition: Status = {
            "type": c.CONDITION_WORKERS_PENDING,
            "status": "True",
            "reason": reasons.UNSCHEDULABLE,
            "message": message,
            "lastUpdateTime": self.now,
            "lastTransitionTime": since or self.now,
        }
        self.status["conditions"] = [*others, condition]
        self.event(reasons.WARNING, reasons.WORKERS_PENDING, message)

    def running_never_set(self) -> None:
        """Upstream #787: a job that finished unseen gets Running=False dated no later than its
        end."""
        when = self.status.get("completionTime") or self.now
        self.status.setdefault("conditions", []).append(
            {
                "type": c.CONDITION_RUNNING,
                "status": "False",
                "reason": reasons.MPIJOB_RUNNING,
                "message": reasons.running_never_set_message(self.job.namespace, self.job.name),
                "lastUpdateTime": when,
                "lastTransitionTime": when,
            }
        )


def failure(
    job: MPIJob, launcher: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> tuple[str, str]:
    """Upstream `updateMPIJobFailedStatus`'s reason and message, from the launcher Job's Failed
    condition.

    After BackoffLimitExceeded the newest failed launcher pod's reason and message are appended.
    """
    cond = job_condition(launcher, "Failed") or {}
    reason = str(cond.get("reason") or "") or reasons.MPIJOB_FAILED
    message = str(cond.get("message") or "") or reasons.failed_message(job.namespace, job.name)
    if reason == reasons.JOB_REASON_BACKOFF_LIMIT_EXCEEDED:
        last: Mapping[str, Any] | None = None
        last_created = datetime.min.replace(tzinfo=UTC)
        for pod in pods:
            if pod_phase(pod) != POD_FAILED:
                continue
            created = parse_time(metadata(pod).get("creationTimestamp"))
            created = created or datetime.min.replace(tzinfo=UTC)
            if last is None or last_created < created:
                last, last_created = pod, created
        if last is not None:
            reason += "/" + pod_status_field(last, "reason")
            message += ": " + pod_status_field(last, "message")
    return reason, reasons.truncate_message(message)


def compute_status(
    job: MPIJob, observed: Observed, *, now: datetime, fail_on_eviction: bool = True
) -> StatusUpdate:
    """The status of `job` (canonical, defaulted, valid) given what its children look like now.

    Pass the children as they are *after* this sync's plan was applied (`planning.observed_after`,
    or the objects the API returned): upstream reports the launcher Job it has just created.
    `fail_on_eviction=False` (elastic jobs) leaves an evicted worker to replacement instead of
    failing.
    """
    sync = _Sync(job, now)
    status = sync.status
    namespace, name = job.namespace, job.name
    suspended = job.spec.run_policy.suspend
    if job.generation:
        status["observedGeneration"] = job.generation

    if not status.get("conditions"):
        message = reasons.created_message(namespace, name)
        sync.condition(c.CONDITION_CREATED, "True", reasons.MPIJOB_CREATED, message)
        sync.event(reasons.NORMAL, reasons.MPIJOB_CREATED, message)
        sync.counters.append(JobCounter.CREATED)

    # Second phase of the finish: the plan cleans up; workers are reported as gone.
    if is_finished(status) and status.get("completionTime") is not None:
        if job.spec.run_policy.clean_pod_policy in (
            c.CLEAN_POD_POLICY_ALL,
            c.CLEAN_POD_POLICY_RUNNING,
        ):
            sync.replica_statuses[c.REPLICA_WORKER] = {}
        sync.pending((), 0)
        return sync.result()

    if status.get("startTime") is None and not suspended:
        status["startTime"] = sync.now

    launcher = observed.launcher_job
    if launcher is not None and not is_controlled_by(launcher, job):
        launcher = None  # a conflict: the plan reports it
    done = launcher is not None and is_job_finished(launcher)

    if suspended:
        if sync.condition(
            c.CONDITION_SUSPENDED, "True", reasons.MPIJOB_SUSPENDED, reasons.SUSPENDED_MESSAGE
        ):
            sync.event(reasons.NORMAL, reasons.MPIJOB_SUSPENDED, reasons.SUSPENDED_MESSAGE)
    elif get_condition(status, c.CONDITION_SUSPENDED) is not None and sync.condition(
        c.CONDITION_SUSPENDED, "False", reasons.MPIJOB_RESUMED, reasons.RESUMED_MESSAGE
    ):
        sync.event(reasons.NORMAL, reasons.MPIJOB_RESUMED, reasons.RESUMED_MESSAGE)
        status["startTime"] = sync.now

    launcher_running = 0
    if launcher is not None:
        launcher_running = sync.launcher(
            launcher, launcher_pods_of(launcher, observed.launcher_pods)
        )

    running, expected = 0, 0
    if done or suspended:
        sync.replica_statuses[c.REPLICA_WORKER] = {}
        sync.pending((), 0)
    else:
        # Upstream counts the pods of indices 0..replicas-1 (created in this sync if missing).
        expected = config.worker_replicas(job)
        own = workers_by_index(job, observed)
        pods = [own[index] for index in sorted(own) if index < expected]
        running = sync.workers(pods, expected, fail_on_eviction=fail_on_eviction)
        sync.pending(pods, expected)

    if suspended:
        message = reasons.suspended_running_message(namespace, name)
        sync.condition(c.CONDITION_RUNNING, "False", reasons.MPIJOB_SUSPENDED, message)
    elif is_finished(status):
        if get_condition(status, c.CONDITION_RUNNING) is None:
            sync.running_never_set()
    elif launcher is not None and launcher_running >= 1 and running == expected:
        message = reasons.running_message(namespace, name)
        if sync.condition(c.CONDITION_RUNNING, "True", reasons.MPIJOB_RUNNING, message):
            sync.event(
                reasons.NORMAL,
                reasons.MPIJOB_RUNNING,
                reasons.running_event_message(namespace, name),
            )
    return sync.result()
