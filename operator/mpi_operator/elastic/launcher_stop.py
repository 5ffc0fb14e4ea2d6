"""Stopping the launcher of a job the elastic layer failed (below minReplicas for too long).

The launcher Job knows nothing of the MPIJob's Failed condition, and its horovodrun would wait for
hosts forever, so its `spec.activeDeadlineSeconds` is lowered to the time it has been active: the
Job controller ends it with `DeadlineExceeded` and the Job stays for `kubectl describe`. Only a sync
that reads the stored Failed condition back does this, so the launcher's own failure never replaces
the below-minReplicas reason. Why not suspend or delete: "Below minReplicas" in
docs/architecture.md#the-elastic-state-machine. Pure: job, launcher Job and `now` in, a merge patch
out.
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
            f"(spec.activeDeadlineSeconds={deadline}; the Job controller ends it with "
            "DeadlineExceeded)"
        )


def _failed_below_min(job: MPIJob) -> bool:
    status = job.status
    return status is not None and any(
        cond.type == c.CONDITION_FAILED
        and cond.status == "True"
        and cond.reason == BELOW_MIN_REPLICAS
        for cond in status.conditions
    )


def launcher_stop(
    job: MPIJob, launcher: Mapping[str, Any] | None, *, now: datetime
) -> LauncherStop | None:
    """The write that stops `launcher` once `job` failed below minReplicas; None when nothing is to
    do.

    The deadline is the Job's active time so far, whole seconds rounded down (at least 1, the API's
    minimum), so it has passed when the Job controller reads it; a deadline already at or below that
    is left alone, which makes the write happen once."""
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
