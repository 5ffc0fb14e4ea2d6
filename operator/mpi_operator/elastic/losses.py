"""Why a worker was lost: taken by the cluster (a disruption) or ended by its own program.

The cluster says so on the pod, as Kubernetes components do since 1.26: condition
`DisruptionTarget=True` with the reason of whoever took it (scheduler preemption, the taint manager,
the Eviction API, the kubelet's node-pressure eviction, the pod garbage collector), or, from older
kubelets, `status.reason: Evicted`; a container the runtime lost with its node (a reboot) ends with
reason `Unknown` or `ContainerStatusUnknown`, never by itself. A pod deleted without any of these
was deleted by a user or another controller: no program failure either. Only a program failure
counts against `maxReplacements`. Pure: pod JSON in, strings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mpi_operator import reasons
from mpi_operator.objects import pod_status_field

DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
DELETION_BY_TAINT_MANAGER: Final = "DeletionByTaintManager"
EVICTION_BY_EVICTION_API: Final = "EvictionByEvictionAPI"
TERMINATION_BY_KUBELET: Final = "TerminationByKubelet"
DELETION_BY_POD_GC: Final = "DeletionByPodGC"
CONTAINER_UNKNOWN: Final = "Unknown"
CONTAINER_STATUS_UNKNOWN: Final = "ContainerStatusUnknown"
DELETED: Final = "Deleted"
"""Deleted without a `DisruptionTarget` condition: by a user or another controller."""

_WHO: Final = {
    PREEMPTION_BY_SCHEDULER: "preempted by the scheduler",
    DELETION_BY_TAINT_MANAGER: "deleted by the taint manager, its node not ready or tainted",
    EVICTION_BY_EVICTION_API: "evicted through the Eviction API, as a drain does",
    TERMINATION_BY_KUBELET: "evicted by the kubelet under node pressure",
    DELETION_BY_POD_GC: "deleted by the pod garbage collector, its node gone",
    DELETED: "deleted by a user or a controller",
    CONTAINER_UNKNOWN: "lost with its node, its container gone without exiting",
    CONTAINER_STATUS_UNKNOWN: "lost with its node, its container gone without exiting",
}


def disruption_reason(pod: Mapping[str, Any]) -> str | None:
    """The reason of the pod's `DisruptionTarget=True` condition, `TerminationByKubelet` for a
    pod the kubelet evicted, a lost container's reason, else None."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == DISRUPTION_TARGET
            and condition.get("status") == "True"
        ):
            return str(condition.get("reason") or DISRUPTION_TARGET)
    if pod_status_field(pod, "reason") == reasons.EVICTED_POD_REASON:
        return TERMINATION_BY_KUBELET
    return _lost_container(status)


def _lost_container(status: Any) -> str | None:
    """The reason of a container that ended with its node rather than by itself, if any."""
    statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
    for cs in statuses if isinstance(statuses, list) else []:
        for key in ("state", "lastState"):
            state = cs.get(key) if isinstance(cs, Mapping) else None
            ended = state.get("terminated") if isinstance(state, Mapping) else None
            reason = ended.get("reason") if isinstance(ended, Mapping) else None
            if reason in (CONTAINER_UNKNOWN, CONTAINER_STATUS_UNKNOWN):
                return str(reason)
    return None


def describe_disruption(reason: str) -> str:
    """The words for a disruption reason, with the reason itself (unknown ones as they are)."""
    who = _WHO.get(reason)
    return f"{who} ({reason})" if who else f"disrupted ({reason})"
