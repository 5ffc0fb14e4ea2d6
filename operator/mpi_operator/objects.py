"""The plain-JSON object vocabulary every layer shares: how to read a Kubernetes object as the API
server sends it.

Objects arrive as JSON (from the API server, a store or a test): any field may be absent or of an
unexpected type, so every reader here is defensive and none mutates what it reads. The standard
library only, so that every layer may import it, the generic runtime (cache/, kube/) included
(`.importlinter`); anything that needs the MPIJob model belongs above, in `desired.naming`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, TypeGuard

KubeObject = dict[str, Any]
"""A Kubernetes object (or part of one) as plain JSON data."""

WatchEvent = dict[str, Any]
"""A raw watch event: {"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}."""

POD_PENDING: Final = "Pending"
POD_RUNNING: Final = "Running"
POD_SUCCEEDED: Final = "Succeeded"
POD_FAILED: Final = "Failed"


def is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """`isinstance(value, Mapping)`, with decoded JSON's dicts answered first: the ABC's
    __instancecheck__ costs several times more, and this runs on every read of every object."""
    return type(value) is dict or isinstance(value, Mapping)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if is_mapping(value) else {}


# --- metadata ------------------------------------------------------------------------------------


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata`, or an empty mapping when it is absent or not an object."""
    return _mapping(obj.get("metadata"))


def name_of(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    """The namespace; "" for a cluster-scoped object (or one that names none yet)."""
    return str(metadata(obj).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str | None:
    uid = metadata(obj).get("uid")
    return uid if isinstance(uid, str) and uid else None


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("resourceVersion") or "")


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Being deleted: `deletionTimestamp` is set (finalizers or a grace period keep it around)."""
    return metadata(obj).get("deletionTimestamp") is not None


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked `controller: true` (the API server allows at most one)."""
    for ref in metadata(obj).get("ownerReferences") or ():
        if is_mapping(ref) and ref.get("controller") is True:
            return ref
    return None


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid the controller reference names, None without one (or without a uid)."""
    ref = controller_ref(obj)
    uid = ref.get("uid") if ref is not None else None
    return uid if isinstance(uid, str) and uid else None


def is_controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """`metav1.IsControlledBy`: the controller reference carries `owner_uid`.

    Compared as given, as upstream does, so objects built for an owner without a uid (tests, dry
    runs) still match it."""
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == owner_uid


# --- status --------------------------------------------------------------------------------------


def status_field(obj: Mapping[str, Any], key: str) -> Any:
    """`status.<key>`, None when absent."""
    return _mapping(obj.get("status")).get(key)


def _true_condition(obj: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    conditions = status_field(obj, "conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if is_mapping(cond) and cond.get("type") == condition_type and cond.get("status") == "True":
            return cond
    return None


def pod_phase(pod: Mapping[str, Any]) -> str:
    phase = status_field(pod, "phase")
    return phase if isinstance(phase, str) else ""


def pod_status_field(pod: Mapping[str, Any], key: str) -> str:
    """A string field of the pod's status (`reason`, `message`), "" when absent."""
    value = status_field(pod, key)
    return value if isinstance(value, str) else ""


def unschedulable_message(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's message on a pod it could not place (`PodScheduled=False`, reason
    `Unschedulable`, still Pending and not being deleted); None for any other pod."""
    if pod_phase(pod) not in ("", POD_PENDING) or is_terminating(pod):
        return None
    conditions = status_field(pod, "conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if (
            is_mapping(cond)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return str(cond.get("message") or "")
    return None


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """Phase Running, condition Ready=True and not being deleted: a pod that answers now and is not
    about to stop (the EndpointSlice sense of `ready`, which a terminating endpoint never is).

    For a worker that means its sshd answers (its readiness probe), so Horovod and mpirun may use
    it; a pod losing this is a host to drop from discovery at once (`runtime.handlers.lost_pod`).
    """
    return (
        pod_phase(pod) == POD_RUNNING
        and _true_condition(pod, "Ready") is not None
        and not is_terminating(pod)
    )


def pod_ready_since(pod: Mapping[str, Any]) -> datetime | None:
    """When the pod's Ready condition last turned True (its lastTransitionTime); None when it is
    not True or carries no time."""
    cond = _true_condition(pod, "Ready")
    return parse_time(cond.get("lastTransitionTime")) if cond is not None else None


# --- batch/v1 Jobs -------------------------------------------------------------------------------


def job_condition(job: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The Job's condition of `condition_type` when its status is True."""
    return _true_condition(job, condition_type)


def is_job_succeeded(job: Mapping[str, Any]) -> bool:
    return job_condition(job, "Complete") is not None


def is_job_failed(job: Mapping[str, Any]) -> bool:
    return job_condition(job, "Failed") is not None


def is_job_finished(job: Mapping[str, Any]) -> bool:
    """Upstream `isJobFinished`: Complete=True or Failed=True."""
    return is_job_succeeded(job) or is_job_failed(job)


def is_job_suspended(job: Mapping[str, Any]) -> bool:
    return _mapping(job.get("spec")).get("suspend") is True


# --- time ----------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it (`2024-01-02T03:04:05Z`), or None."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
