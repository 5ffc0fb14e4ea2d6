"""What the stores hold for one MPIJob (`Observed`), which of those objects are the job's own, and
what they will hold once a plan has been applied (`observed_after`).

How to read one object (name, phase, readiness, conditions) is `mpi_operator.objects`; nothing here
ever mutates what the stores hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, naming
from mpi_operator.objects import KubeObject, is_controlled_by, name_of, uid_of
from mpi_operator.planning.actions import Delete, Patch, Plan, Update, UpdateStatus


@dataclass(frozen=True)
class Observed:
    """The children of one MPIJob as the informer stores hold them (read-only snapshots).

    The reconciler fills each slot by name (`<job>`, `<job>-config`, `<job>-ssh`, `<job>-launcher`,
    the PodGroup `<job>`), whoever controls the object, so that foreign objects surface as
    conflicts. `worker_pods`: every pod of the job's workers, terminating ones included, plus any
    pod found under a desired worker name; `launcher_pods`: the pods the launcher Job controls.
    """

    service: KubeObject | None = None
    config_map: KubeObject | None = None
    secret: KubeObject | None = None
    launcher_job: KubeObject | None = None
    launcher_pods: Sequence[KubeObject] = ()
    worker_pods: Sequence[KubeObject] = ()
    pod_group: KubeObject | None = None
    pdb: KubeObject | None = None
    """The PodDisruptionBudget `<job>-workers` (`desired.pdb`)."""


def launcher_pods_of(
    launcher: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The pods the launcher Job controls (upstream `jobPods`); without uids to compare, all of
    them."""
    uid = uid_of(launcher)
    if uid is None:
        return list(pods)
    return [pod for pod in pods if is_controlled_by(pod, uid)]


# --- workers -------------------------------------------------------------------------------------


def workers_by_index(job: MPIJob, observed: Observed) -> dict[int, Mapping[str, Any]]:
    """The job's own worker pods (labels, controller and name agree), by index."""
    out: dict[int, Mapping[str, Any]] = {}
    for pod in observed.worker_pods:
        index = config.observed_worker_index(job, pod)
        if index is not None and naming.is_controlled_by(pod, job):
            out[index] = pod
    return out


def pods_by_name(observed: Observed) -> dict[str, Mapping[str, Any]]:
    return {name_of(pod): pod for pod in observed.worker_pods}


# --- simulation ----------------------------------------------------------------------------------

_SLOTS = {
    "Service": "service",
    "ConfigMap": "config_map",
    "Secret": "secret",
    "Job": "launcher_job",
    "PodDisruptionBudget": "pdb",
}


def merge_patched(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> KubeObject:
    """`obj` after a JSON merge patch (RFC 7386: maps merge, None removes a key, the rest replaces).

    New dicts along the patched paths; everything else is shared with `obj` and `patch`, which, like
    every object here, are read-only."""
    out = dict(obj)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            current = out.get(key)
            out[key] = merge_patched(current if isinstance(current, Mapping) else {}, value)
        else:
            out[key] = value
    return out


def observed_after(observed: Observed, plan: Plan) -> Observed:
    """What the stores will hold once `plan` is applied and its deletions completed.

    The API server adds defaults and metadata the objects here lack; everything the plan compares is
    exactly what was sent. Used to compute the status of the same sync (upstream hands the objects
    it just created to `updateMPIJobStatus`) and to check that planning is idempotent. The result
    shares what it does not change with `observed` and the plan's objects: read it, never mutate it.
    """
    slots: dict[str, Any] = {
        f.name: getattr(observed, f.name) for f in dataclasses.fields(observed)
    }
    workers = {name_of(pod): pod for pod in observed.worker_pods}

    def slot(kind: str) -> str | None:
        return "pod_group" if kind == "PodGroup" else _SLOTS.get(kind)

    for action in plan.actions:
        kind, name = action.ref.kind, action.ref.name
        current = workers.get(name) if kind == "Pod" else (slots[s] if (s := slot(kind)) else None)
        new: KubeObject | None
        if isinstance(action, Delete):
            new = None
        elif isinstance(action, Patch):
            if current is None:
                continue  # 404: the applier skips it
            new = merge_patched(current, action.patch)
        else:
            new = dict(action.obj)
            # The main resource ignores status and the status subresource ignores everything else.
            if isinstance(action, Update) and current is not None and "status" in current:
                new["status"] = current["status"]
            elif isinstance(action, UpdateStatus) and current is not None:
                new = {**current, "status": new.get("status", {})}
        if kind == "Pod":
            if new is None:
                workers.pop(name, None)
            else:
                workers[name] = new
        elif (s := slot(kind)) is not None:
            slots[s] = new
    slots["worker_pods"] = tuple(workers.values())
    return Observed(**slots)
