"""Stopping the launcher of a job the elastic layer failed (ready workers below minReplicas too long).

The Failed condition ends the MPIJob, but the launcher Job knows nothing of it: its horovodrun would wait
for hosts forever. The operator stops it the way a Kubernetes user stops a Job that has run long enough:
it lowers the Job's `spec.activeDeadlineSeconds` (mutable on a running Job) to the time the Job has been
active, so the Job controller fails the Job with `DeadlineExceeded` and terminates its pod. The Job
object stays, so `kubectl describe job` shows what happened and when; the launcher pod is deleted by the
Job controller, as for any Job past its deadline (collect its logs with your log pipeline).

Suspending the Job instead would leave a Job that looks resumable (and Kueue owns `suspend`), and
deleting it would lose the record. Ordering makes it safe: the MPIJob's Failed condition (with its
completionTime) is stored by the sync that decides the failure, and only a later sync, which reads that
condition back, stops the launcher. A finished MPIJob's status is never recomputed from its children,
so the launcher's own `DeadlineExceeded` cannot replace the below-minReplicas reason and message.
Pure: the job, the observed launcher Job and `now` in, a merge patch out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.desired.naming import is_controlled_by
from mpi_operator.elastic.replacement import BELOW_MIN_REPLICAS
from mpi_operator.objects import is_job_finished, is_terminating, name_of, parse_time, status_field

LAUNCHER_STOPPED: Final = "LauncherStopped"
"""The Event recorded on the MPIJob when its launcher Job is given its deadline."""


@dataclass(frozen=True)
class LauncherStop:
    """Merge-patch the launcher Job `name` with `patch`."""

    name: str
    patch: Mapping[str, Any]

    @property
    def message(self) -> str:
        deadline = self.patch["spec"]["activeDeadlineSeconds"]
        return (
            f"launcher Job {self.name} stopped after the below-minReplicas failure "
            f"(spec.activeDeadlineSeconds={deadline}; the Job controller ends it with DeadlineExceeded)"
        )


def _failed_below_min(job: MPIJob) -> bool:
    status = job.status
    return status is not None and any(
        cond.type == c.CONDITION_FAILED and cond.status == "True" and cond.reason == BELOW_MIN_REPLICAS
        for cond in status.conditions
    )


def launcher_stop(job: MPIJob, launcher: Mapping[str, Any] | None, *, now: datetime) -> LauncherStop | None:
    """The write that stops `launcher` once `job` failed below minReplicas; None when nothing is to do.

    The deadline is the Job's active time so far, whole seconds rounded down (at least 1, the API's
    minimum), so it has passed when the Job controller reads it; a deadline already at or below that is
    left alone, which makes the write happen once."""
    if launcher is None or not _failed_below_min(job) or not is_controlled_by(launcher, job):
        return None
    if is_job_finished(launcher) or is_terminating(launcher):
        return None
    started = parse_time(status_field(launcher, "startTime"))
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    if started is not None and started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    active = (now - started).total_seconds() if started is not None else 0.0
    deadline = max(1, math.floor(active))
    spec = launcher.get("spec")
    current = spec.get("activeDeadlineSeconds") if isinstance(spec, Mapping) else None
    if isinstance(current, int) and not isinstance(current, bool) and current <= deadline:
        return None
    return LauncherStop(name=name_of(launcher), patch={"spec": {"activeDeadlineSeconds": deadline}})
