"""Pure logic of node failure: what the node lifecycle controller writes when a kubelet goes silent
or comes back (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`), the pod Ready change of
`MarkPodsNotReady` (`pkg/controller/util/node/controller_utils.go`), and when the taint eviction
controller deletes a pod (`pkg/controller/tainteviction/taint_eviction.go`). Functions of data: the
controllers that apply them are `nodelifecycle.py` and `tainteviction.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesim.scheduling.filters import tolerates

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
HEALTH_TAINT_KEYS = (UNREACHABLE, NOT_READY)
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."

TAINT_MANAGER_REASON = "DeletionByTaintManager"
TAINT_MANAGER_MESSAGE = "Taint manager: deleting due to NoExecute taint"
POD_GC_REASON = "DeletionByPodGC"
POD_GC_ORPHAN_MESSAGE = "PodGC: node no longer exists"


def ready_status(node: Mapping[str, Any]) -> str:
    """The node's Ready condition status: True, False or Unknown (no condition: Unknown)."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown")
    return "Unknown"


def unknown_conditions(conditions: Sequence[Mapping[str, Any]], now: str) -> list[dict[str, Any]]:
    """Every condition the kubelet posted becomes Unknown (NodeStatusUnknown), as
    `tryUpdateNodeHealth` does once the grace period has passed: the heartbeat stays the kubelet's
    last, the transition is `now`."""
    changed = []
    for condition in conditions:
        if condition.get("status") == "Unknown":
            changed.append(dict(condition))
            continue
        changed.append(
            {
                **condition,
                "status": "Unknown",
                "lastTransitionTime": now,
                "reason": UNKNOWN_REASON,
                "message": UNKNOWN_MESSAGE,
            }
        )
    return changed


def health_taints(
    taints: Sequence[Mapping[str, Any]], ready: str, now: str
) -> list[dict[str, Any]]:
    """The node's taints with the lifecycle controller's own set for a Ready status: Unknown adds
    `unreachable` NoExecute (with timeAdded) and NoSchedule, False adds `not-ready` the same way,
    True removes both; the user's taints are kept as they are."""
    kept = [dict(t) for t in taints if t.get("key") not in HEALTH_TAINT_KEYS]
    key = {"Unknown": UNREACHABLE, "False": NOT_READY}.get(ready)
    if key is None:
        return kept
    current = {(t.get("key"), t.get("effect")): dict(t) for t in taints if t.get("key") == key}
    no_execute = current.get((key, "NoExecute")) or {
        "key": key,
        "effect": "NoExecute",
        "timeAdded": now,
    }
    no_schedule = current.get((key, "NoSchedule")) or {"key": key, "effect": "NoSchedule"}
    return [*kept, no_schedule, no_execute]


def pod_not_ready(status: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """`MarkPodsNotReady`: the pod's Ready condition turns False (its reason and message kept, the
    transition `now`); None when it is not True (nothing to write)."""
    conditions = list(status.get("conditions") or ())
    for i, condition in enumerate(conditions):
        if condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            conditions[i] = {**condition, "status": "False", "lastTransitionTime": now}
            return {**status, "conditions": conditions}
    return None


def no_execute_taints(taints: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in taints if t.get("effect") == "NoExecute"]


def eviction_delay(
    tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Mapping[str, Any]]
) -> float | None:
    """Seconds until the taint eviction controller deletes a pod on a node with these taints: 0
    when a NoExecute taint is not tolerated, else the shortest `tolerationSeconds` of the
    tolerations used (`getMinTolerationTime`: 0 or less is at once), None when they tolerate it
    forever or there is no NoExecute taint."""
    used: list[Mapping[str, Any]] = []
    for taint in no_execute_taints(taints):
        # GetMatchingTolerations: the first toleration of each taint counts.
        matching = next((t for t in tolerations if tolerates(t, taint)), None)
        if matching is None:
            return 0.0
        used.append(matching)
    if not used:
        return None
    seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    return float(max(0, min(int(s) for s in seconds)))


def disruption_condition(reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def with_condition(status: Mapping[str, Any], condition: Mapping[str, Any]) -> dict[str, Any]:
    """`status` with `condition` in place of any of its type."""
    kept = [c for c in status.get("conditions") or () if c.get("type") != condition["type"]]
    return {**status, "conditions": [*kept, dict(condition)]}
