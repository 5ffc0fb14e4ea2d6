"""What the stores hold for one MPIJob (`Observed`), how to read those objects, and what they will hold
once a plan has been applied (`observed_after`).

Everything is read defensively: objects come from the API server (or a test) as plain JSON, fields may
be absent, and nothing here ever mutates them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, naming
from mpi_operator.desired.naming import KubeObject
from mpi_operator.planning.actions import Delete, Plan, Update, UpdateStatus

POD_RUNNING = "Running"
POD_PENDING = "Pending"
POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"


@dataclass(frozen=True)
class Observed:
    """The children of one MPIJob as the informer stores hold them (read-only snapshots).

    The reconciler fills each slot by name (`<job>`, `<job>-config`, `<job>-ssh`, `<job>-launcher`, the
    PodGroup `<job>`), whoever controls the object, so that foreign objects surface as conflicts.
    `worker_pods`: every pod of the job's workers, terminating ones included, plus any pod found under
    a desired worker name; `launcher_pods`: the pods the launcher Job controls.
    """

    service: KubeObject | None = None
    config_map: KubeObject | None = None
    secret: KubeObject | None = None
    launcher_job: KubeObject | None = None
    launcher_pods: Sequence[KubeObject] = ()
    worker_pods: Sequence[KubeObject] = ()
    pod_group: KubeObject | None = None


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("name") or "")


def uid_of(obj: Mapping[str, Any]) -> str | None:
    uid = metadata(obj).get("uid")
    return uid if isinstance(uid, str) and uid else None


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return config.is_terminating(obj)


def is_controlled_by(obj: Mapping[str, Any], job: MPIJob) -> bool:
    """`metav1.IsControlledBy`: the object's controller reference carries the job's uid."""
    return naming.is_controlled_by(dict(obj), job)


def pod_phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def pod_status_field(pod: Mapping[str, Any], key: str) -> str:
    status = pod.get("status")
    value = status.get(key) if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else ""


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """Running with condition Ready=True (the kubelet's word that sshd answers)."""
    return config.is_pod_ready(pod)


def is_pod_serving(pod: Mapping[str, Any]) -> bool:
    """Ready and not being deleted: a worker Horovod may use now."""
    return is_pod_ready(pod) and not is_terminating(pod)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it, or None."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# --- the launcher batch/v1 Job -------------------------------------------------------------------


def job_condition(launcher: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The launcher Job's condition of `condition_type` when its status is True."""
    status = launcher.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, Mapping) and cond.get("type") == condition_type and cond.get("status") == "True":
            return cond
    return None


def is_job_succeeded(launcher: Mapping[str, Any]) -> bool:
    return job_condition(launcher, "Complete") is not None


def is_job_failed(launcher: Mapping[str, Any]) -> bool:
    return job_condition(launcher, "Failed") is not None


def is_job_finished(launcher: Mapping[str, Any]) -> bool:
    """Upstream `isJobFinished`: Complete=True or Failed=True."""
    return is_job_succeeded(launcher) or is_job_failed(launcher)


def is_job_suspended(launcher: Mapping[str, Any]) -> bool:
    spec = launcher.get("spec")
    return isinstance(spec, Mapping) and spec.get("suspend") is True


def job_status_field(launcher: Mapping[str, Any], key: str) -> Any:
    status = launcher.get("status")
    return status.get(key) if isinstance(status, Mapping) else None


def launcher_pods_of(
    launcher: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The pods the launcher Job controls (upstream `jobPods`); without uids to compare, all of them."""
    uid = uid_of(launcher)
    if uid is None:
        return list(pods)
    out = []
    for pod in pods:
        refs = metadata(pod).get("ownerReferences") or []
        controller = next((r for r in refs if isinstance(r, Mapping) and r.get("controller") is True), None)
        if controller is not None and controller.get("uid") == uid:
            out.append(pod)
    return out


# --- workers -------------------------------------------------------------------------------------


def workers_by_index(job: MPIJob, observed: Observed) -> dict[int, Mapping[str, Any]]:
    """The job's own worker pods (labels, controller and name agree), by index."""
    out: dict[int, Mapping[str, Any]] = {}
    for pod in observed.worker_pods:
        index = config.observed_worker_index(job, pod)
        if index is not None and is_controlled_by(pod, job):
            out[index] = pod
    return out


def pods_by_name(observed: Observed) -> dict[str, Mapping[str, Any]]:
    return {name_of(pod): pod for pod in observed.worker_pods}


# --- simulation ----------------------------------------------------------------------------------

_SLOTS = {"Service": "service", "ConfigMap": "config_map", "Secret": "secret", "Job": "launcher_job"}


def observed_after(observed: Observed, plan: Plan) -> Observed:
    """What the stores will hold once `plan` is applied and its deletions completed.

    The API server adds defaults and metadata the objects here lack; everything the plan compares is
    exactly what was sent. Used to compute the status of the same sync (upstream hands the objects it
    just created to `updateMPIJobStatus`) and to check that planning is idempotent.
    """
    slots: dict[str, Any] = {f.name: getattr(observed, f.name) for f in dataclasses.fields(observed)}
    workers = {name_of(pod): pod for pod in observed.worker_pods}

    def slot(kind: str) -> str | None:
        return "pod_group" if kind == "PodGroup" else _SLOTS.get(kind)

    for action in plan.actions:
        kind, name = action.ref.kind, action.ref.name
        current = workers.get(name) if kind == "Pod" else (slots[s] if (s := slot(kind)) else None)
        new: KubeObject | None
        if isinstance(action, Delete):
            new = None
        else:
            new = copy.deepcopy(action.obj)
            # The main resource ignores status and the status subresource ignores everything else.
            if isinstance(action, Update) and current is not None and "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            elif isinstance(action, UpdateStatus) and current is not None:
                new = {**copy.deepcopy(dict(current)), "status": new.get("status", {})}
        if kind == "Pod":
            if new is None:
                workers.pop(name, None)
            else:
                workers[name] = new
        elif (s := slot(kind)) is not None:
            slots[s] = new
    slots["worker_pods"] = tuple(workers.values())
    return Observed(**slots)
