"""PodDisruptionBudgets as functions of data: which pods a budget selects, its status, and the
Eviction API's budget check.

The status follows the disruption controller (`pkg/controller/disruption/disruption.go`); the check
and its refusals follow the eviction registry (`pkg/registry/core/pod/storage/eviction.go`). The
controller (`kubesim.controllers.disruption`) and the cluster's `evict` apply them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from kubesim import errors
from kubesim.admission.builtin import selector_matches

DELETION_TIMEOUT = timedelta(minutes=2)
"""How long an evicted pod stays in `disruptedPods` (not counted healthy) before it must be gone."""
BUDGET_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction "
    "subresource does not support."
)
CONDITION = "DisruptionAllowed"
STAMP = "%Y-%m-%dT%H:%M:%SZ"


def selects(pdb: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """policy/v1: a missing selector selects nothing, an empty one every pod of the namespace."""
    selector = (pdb.get("spec") or {}).get("selector")
    return isinstance(selector, dict) and selector_matches(selector, dict(labels))


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _parse(stamp: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


def scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def desired_healthy(spec: Mapping[str, Any], pod_count: int, scale: int) -> tuple[int, int]:
    """(expectedPods, desiredHealthy): an integer minAvailable counts the matching pods; a
    percentage or maxUnavailable counts `scale`, the replicas their controllers ask for."""
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        return scale, max(0, scale - scaled(max_unavailable, scale))
    if isinstance(min_available, int):
        return pod_count, min_available
    if min_available is not None:
        return scale, scaled(min_available, scale)
    return pod_count, 0


def live_disruptions(
    disrupted: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """buildDisruptedPodMap: entries for pods still there, not yet being deleted, within the
    timeout."""
    kept: dict[str, Any] = {}
    for name, stamp in disrupted.items():
        pod = pods.get(name)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        at = _parse(stamp)
        if at is not None and at + DELETION_TIMEOUT < now:
            continue
        kept[name] = stamp
    return kept


def next_expiry(disrupted: Mapping[str, Any]) -> datetime | None:
    """When the first `disruptedPods` entry runs out (the controller looks again then)."""
    times = [t for t in (_parse(s) for s in disrupted.values()) if t is not None]
    return min(times) + DELETION_TIMEOUT if times else None


def current_healthy(pods: Iterable[Mapping[str, Any]], disrupted: Mapping[str, Any]) -> int:
    """countHealthyPods: Ready pods neither being deleted nor recorded as disrupted."""
    return sum(
        1
        for pod in pods
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
        and (pod.get("metadata") or {}).get("name") not in disrupted
        and is_ready(pod)
    )


def with_condition(status: dict[str, Any], generation: int, stamp: str) -> dict[str, Any]:
    """UpdateDisruptionAllowedCondition: `DisruptionAllowed`, SufficientPods or InsufficientPods."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    text = "True" if allowed else "False"
    previous = next((c for c in status.get("conditions") or [] if c.get("type") == CONDITION), None)
    condition = {
        "type": CONDITION,
        "status": text,
        "observedGeneration": generation,
        "lastTransitionTime": previous["lastTransitionTime"]
        if previous is not None and previous.get("status") == text
        else stamp,
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
    }
    others = [c for c in status.get("conditions") or [] if c.get("type") != CONDITION]
    return {**status, "conditions": [*others, condition]}


def budget_status(
    pdb: Mapping[str, Any],
    pods: Mapping[str, Mapping[str, Any]],
    scale: int,
    now: datetime,
) -> dict[str, Any]:
    """The status the disruption controller writes for `pdb` given its selected `pods` (by name)."""
    status = pdb.get("status") or {}
    disrupted = live_disruptions(status.get("disruptedPods") or {}, pods, now)
    expected, desired = desired_healthy(pdb.get("spec") or {}, len(pods), scale)
    healthy = current_healthy(pods.values(), disrupted)
    allowed = healthy - desired
    # No pods expected yet is a safe state: nothing may be disrupted before the controller has
    # looked.
    if expected <= 0 or allowed <= 0:
        allowed = 0
    new: dict[str, Any] = {
        "observedGeneration": int((pdb.get("metadata") or {}).get("generation") or 0),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        new["disruptedPods"] = disrupted
    if status.get("conditions"):
        new["conditions"] = status["conditions"]
    return with_condition(new, new["observedGeneration"], now.strftime(STAMP))


def _too_many_requests(cause: str) -> errors.StatusError:
    return errors.StatusError(
        429,
        "TooManyRequests",
        BUDGET_VIOLATION,
        causes=[{"reason": "DisruptionBudget", "message": cause}],
    )


def check_and_decrement(pdb: Mapping[str, Any], pod_name: str, now: datetime) -> dict[str, Any]:
    """The budget's status after allowing one eviction of `pod_name`; raises the registry's
    refusals."""
    meta, status = pdb.get("metadata") or {}, pdb.get("status") or {}
    name = str(meta.get("name") or "")
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _too_many_requests(
            f"The disruption budget {name} is still being processed by the server."
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden(
            "poddisruptionbudget", "policy", name, "pdb disruptions allowed is negative"
        )
    if allowed == 0:
        desired, healthy = (
            int(status.get("desiredHealthy") or 0),
            int(status.get("currentHealthy") or 0),
        )
        raise _too_many_requests(
            f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
        )
    new = {**status, "disruptionsAllowed": allowed - 1}
    if allowed == 1:
        new = with_condition(new, int(status.get("observedGeneration") or 0), now.strftime(STAMP))
    new["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now.strftime(STAMP)}
    return new
