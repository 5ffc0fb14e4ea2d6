"""The MPIJob condition engine: upstream's `setCondition` / `filterOutCondition` on a status dict.

Conditions are a list-map keyed by `type`, at most one per type. Setting one is a no-op when its
status and reason are unchanged (a new message alone is ignored); a changed reason keeps
lastTransitionTime; the condition moves to the end of the list. Running and Restarting exclude each
other, and a terminal condition (Failed, Succeeded) turns Running (and an earlier Failed) False
without touching their reason, message or times. Times are the caller's (`now`, already in wire
format): no clock here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJobStatus

Status = dict[str, Any]


def get_condition(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    return next(
        (cond for cond in status.get("conditions", []) if cond.get("type") == condition_type), None
    )


def has_condition(status: Mapping[str, Any] | MPIJobStatus | None, condition_type: str) -> bool:
    """Whether the condition is True, in a status as sent (a mapping) or as parsed
    (`MPIJob.status`)."""
    if status is None:
        return False
    if isinstance(status, MPIJobStatus):
        return any(
            cond.type == condition_type and cond.status == "True" for cond in status.conditions
        )
    cond = get_condition(status, condition_type)
    return cond is not None and cond.get("status") == "True"


def is_finished(status: Mapping[str, Any] | MPIJobStatus | None) -> bool:
    """Upstream `isFinished`: Succeeded=True or Failed=True (`is_finished(job.status)` for a parsed
    job)."""
    return has_condition(status, c.CONDITION_SUCCEEDED) or has_condition(status, c.CONDITION_FAILED)


def _filter_out(conditions: Sequence[Mapping[str, Any]], condition_type: str) -> list[Status]:
    out = []
    for cond in conditions:
        kind = cond.get("type")
        if kind == condition_type or {kind, condition_type} == {
            c.CONDITION_RUNNING,
            c.CONDITION_RESTARTING,
        }:
            continue
        item = dict(cond)
        # A terminal condition turns Running (and an earlier Failed) False, keeping reason and
        # times.
        if condition_type in (c.CONDITION_FAILED, c.CONDITION_SUCCEEDED) and kind in (
            c.CONDITION_RUNNING,
            c.CONDITION_FAILED,
        ):
            item["status"] = "False"
        out.append(item)
    return out


def set_condition(
    status: Status,
    condition_type: str,
    value: c.ConditionStatus,
    reason: str,
    message: str,
    now: str,
) -> bool:
    """Upstream `setCondition`: a no-op when status and reason are unchanged (a new message alone is
    ignored); lastTransitionTime survives a reason change; the condition moves to the end of the
    list."""
    current = get_condition(status, condition_type)
    if (
        current is not None
        and current.get("status") == value
        and current.get("reason", "") == reason
    ):
        return False
    condition: Status = {
        "type": condition_type,
        "status": value,
        "reason": reason,
        "message": message,
    }
    condition["lastUpdateTime"] = now
    condition["lastTransitionTime"] = now
    if current is not None and current.get("status") == value:
        if current.get("lastTransitionTime") is not None:
            condition["lastTransitionTime"] = current["lastTransitionTime"]
        else:
            del condition["lastTransitionTime"]
    status["conditions"] = [*_filter_out(status.get("conditions", []), condition_type), condition]
    return True
