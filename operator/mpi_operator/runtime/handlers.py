"""Which informers the operator runs, and watch event -> MPIJob key (client-go's event handlers).

An MPIJob maps to its own key (deletes included, so the reconciler forgets the job); a child to the
MPIJob its controller ownerReference names, a launcher Pod through its launcher Job, and only if
that MPIJob is cached with that uid. A deleted incarnation's child going enqueues the MPIJob now of
that name (`successor_key`): it may have blocked its same-named child. Events are plain `add`s; a
worker pod that could run before an event and cannot after it (`lost_pod`) is enqueued urgently,
at the front, so an elastic job drops that host before Horovod tries it. Updates that change
nothing a sync reads (`pod_update_matters`, `mpijob_update_matters`) enqueue nothing. It lives in
the runtime though it knows the MPIJob's ownership shape: the manager needs it before any
reconciler exists (preflight, informers).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from mpi_operator.api import constants
from mpi_operator.cache import transforms
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.store import object_key
from mpi_operator.kube import resources
from mpi_operator.kube.resources import Resource
from mpi_operator.objects import (
    KubeObject,
    controller_ref,
    is_pod_ready,
    namespace_of,
    uid_of,
    unschedulable_message,
)
from mpi_operator.settings import GangScheduler

log = logging.getLogger(__name__)


class Enqueue(Protocol):
    def __call__(self, key: str, *, urgent: bool = False) -> None: ...


def lost_pod(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """A pod that could run a Horovod worker before the event and cannot after it (None: no
    object)."""
    return old is not None and is_pod_ready(old) and (new is None or not is_pod_ready(new))


METADATA_UNREAD: Final = frozenset({"resourceVersion", "managedFields"})
"""Metadata that changes with every write and that no sync reads."""
JOB_STATUS_UNREAD: Final = frozenset({"active", "ready", "terminating", "uncountedTerminatedPods"})
"""The Job controller's counts of the launcher Job's pods: syncs read those pods themselves, and the
Job's conditions, `failed`, `startTime` and `completionTime`, never these."""


def _ready(status: dict[str, Any]) -> bool:
    """Ready=True: no reader tells False from Unknown or from no condition at all."""
    conditions = status.get("conditions")
    if type(conditions) is list:
        for cond in conditions:
            if type(cond) is dict and cond.get("type") == "Ready":
                return cond.get("status") == "True"
    return False


def _terminated(state: object) -> object:
    return state.get("terminated") if type(state) is dict else None


def pod_status_read(pod: Mapping[str, Any], *, ready: bool = True) -> tuple[object, ...]:
    """What a sync reads of a pod's status (`objects.is_pod_ready`, `status.py`, `elastic.hosts`):
    the phase, reason and message, whether it is Ready=True (not the condition's times; `ready`
    False: not even that, as of a launcher pod, whose readiness no sync reads), the
    scheduler's word on a pod it could not place (`objects.unschedulable_message`), and per
    container its restart count and terminated states. Not: startTime, other conditions, the
    containers' ready, started, running or waiting states. Plain dicts only (what JSON decodes to:
    an ABC check per field cost more than the rest, once per pod event)."""
    status = pod.get("status")
    if type(status) is not dict:
        return ()
    containers = status.get("containerStatuses")
    read = []
    for cs in containers if type(containers) is list else ():
        if type(cs) is not dict:
            continue
        restarts = cs.get("restartCount")
        ended, ended_before = _terminated(cs.get("state")), _terminated(cs.get("lastState"))
        # A container that never restarted nor ended says nothing to a sync (its first status).
        if restarts or ended is not None or ended_before is not None:
            read.append((cs.get("name"), restarts, ended, ended_before))
    return (
        status.get("phase"),
        status.get("reason"),
        status.get("message"),
        ready and _ready(status),
        unschedulable_message(pod),
        tuple(read),
    )


def _metadata_differs(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return _differs(old.get("metadata") or {}, new.get("metadata") or {}, METADATA_UNREAD)


def pod_update_matters(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a pod update can change a sync's plan or status: any metadata but the
    resourceVersion (and managedFields), any spec, or what `pod_status_read` reads (a launcher pod,
    controlled by its Job, without its readiness). The rest (the kubelet's start bookkeeping, a
    launcher turning Ready after Running) would cost a sync that writes nothing."""
    if _metadata_differs(old, new) or old.get("spec") != new.get("spec"):
        return True
    ready = not _is_launcher_pod(new)
    return pod_status_read(old, ready=ready) != pod_status_read(new, ready=ready)


def _is_launcher_pod(pod: Mapping[str, Any]) -> bool:
    ref = controller_ref(pod)
    return ref is not None and is_ref_to(ref, BATCH_GROUP, "Job")


def job_update_matters(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a launcher Job update can change a sync's plan or status: anything but its pod
    counts (`JOB_STATUS_UNREAD`) and the unread metadata. The counts move as its pod starts, after
    the pod's own events: each would cost a sync that writes nothing."""
    return _outside_status_differs(old, new) or _differs(
        old.get("status") or {}, new.get("status") or {}, JOB_STATUS_UNREAD
    )


def mpijob_update_matters(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an MPIJob update can change a sync's plan or status: anything but its status and
    the metadata no sync reads. A status-only update is the echo of a status write, the operator's
    own almost always; a write whose outcome the next sync depends on asks for that sync itself
    (`reconcile.reconciler`), and a status written by someone else is rewritten at the job's next
    sync."""
    return _outside_status_differs(old, new)


_METADATA_AND_STATUS: Final = frozenset({"metadata", "status"})


def _outside_status_differs(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Metadata a sync reads, or anything but the metadata and the status, differs."""
    return _metadata_differs(old, new) or _differs(old, new, _METADATA_AND_STATUS)


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], unread: frozenset[str]) -> bool:
    """Whether any key but the `unread` ones has another value in `new` than in `old`. The same
    keys on both sides (almost every update) take one pass over `new`, without a set union."""
    if old.keys() != new.keys():
        return any(old.get(k) != new.get(k) for k in old.keys() | new.keys() if k not in unread)
    return any(v != old[k] for k, v in new.items() if k not in unread)


BATCH_GROUP = "batch"

OWNED_SELECTOR = f"{constants.LABEL_OPERATOR_NAME}={constants.OPERATOR_NAME}"
"""Matches only objects this operator made: every pod it creates (workers and the launcher template)
carries it, and the reconciler adds it to the Service, ConfigMap, Secret and launcher Job too
(`reconcile.reconciler.with_watch_labels`), so `mpi-operator run` filters every child informer with
`WatchSelectors.owned_only()`. The default below filters Pods only, for callers whose children may
lack the label (objects made by an older operator version are relabelled by the reconciler's
applier)."""
PRIORITY_CLASS = Resource("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass")


@dataclass(frozen=True)
class WatchSelectors:
    """The label selector of each child informer (None: every object in scope)."""

    pods: str | None = OWNED_SELECTOR
    jobs: str | None = None
    services: str | None = None
    config_maps: str | None = None
    secrets: str | None = None
    pod_groups: str | None = None
    pdbs: str | None = None

    @classmethod
    def owned_only(cls) -> WatchSelectors:
        """Every child informer filtered to the operator's label (needs the label on every
        child)."""
        return cls(*(OWNED_SELECTOR,) * 7)


@dataclass(frozen=True)
class Watch:
    """One informer: what it lists and watches, and how its events reach the queue."""

    name: str
    resource: Resource
    selector: str | None
    events: Literal["mpijob", "child"] | None = "child"
    """`mpijob`: its own key; `child`: its controller MPIJob's key; None: cache only."""

    @property
    def transform(self) -> transforms.Transform:
        """What the informer keeps of each object (`cache.transforms`)."""
        return transforms.for_resource(self.resource.group, self.resource.plural)


def pod_group_resource(gang_scheduling: GangScheduler | None) -> Resource | None:
    if gang_scheduling == "volcano":
        return resources.VOLCANO_POD_GROUP
    if gang_scheduling == "scheduler-plugins":
        return resources.SCHEDULER_PLUGINS_POD_GROUP
    return None


def watches(gang_scheduling: GangScheduler | None, selectors: WatchSelectors) -> list[Watch]:
    """The informers of the operator, MPIJobs first."""
    table = [
        Watch("mpijobs", resources.MPIJOB, None, "mpijob"),
        Watch("pods", resources.POD, selectors.pods),
        Watch("jobs", resources.JOB, selectors.jobs),
        Watch("services", resources.SERVICE, selectors.services),
        Watch("configmaps", resources.CONFIG_MAP, selectors.config_maps),
        Watch("secrets", resources.SECRET, selectors.secrets),
        Watch("poddisruptionbudgets", resources.POD_DISRUPTION_BUDGET, selectors.pdbs),
    ]
    pod_groups = pod_group_resource(gang_scheduling)
    if pod_groups is not None:
        table.append(Watch("podgroups", pod_groups, selectors.pod_groups))
        # PodGroups take the priority of the pods' PriorityClass (desired.podgroup): cached, no
        # events.
        table.append(Watch("priorityclasses", PRIORITY_CLASS, None, None))
    return table


class ObjectGetter(Protocol):
    """What the mapping reads from a store (`cache.store.Store` is one)."""

    def get(self, key: str) -> KubeObject | None: ...


def _group(api_version: object) -> str:
    group, sep, _ = str(api_version or "").rpartition("/")
    return group if sep else ""


def is_ref_to(ref: Mapping[str, Any], group: str, kind: str) -> bool:
    return ref.get("kind") == kind and _group(ref.get("apiVersion")) == group


def mpijob_key(obj: Mapping[str, Any]) -> str:
    return object_key(obj)


def owner_key(obj: Mapping[str, Any], *, mpijobs: ObjectGetter, jobs: ObjectGetter) -> str | None:
    """The key of the MPIJob that controls `obj` (directly or through its launcher Job), else
    None."""
    namespace = namespace_of(obj)
    ref = controller_ref(obj)
    if not namespace or ref is None:
        return None
    if is_ref_to(ref, BATCH_GROUP, "Job"):
        job = jobs.get(f"{namespace}/{ref.get('name')}")
        if job is None or uid_of(job) != ref.get("uid"):
            return None
        ref = controller_ref(job)
        if ref is None:
            return None
    if not is_ref_to(ref, constants.GROUP, constants.KIND):
        return None
    key = f"{namespace}/{ref.get('name')}"
    owner = mpijobs.get(key)
    if owner is None or uid_of(owner) != ref.get("uid"):
        return None
    return key


def successor_key(obj: Mapping[str, Any], *, mpijobs: ObjectGetter) -> str | None:
    """The key of the MPIJob now named by `obj`'s controller reference when that is another
    incarnation (another uid) than the one that owned `obj`, else None.

    The leftover may have blocked its successor's same-named child (ErrResourceExists, retried with
    a per-key backoff that grows to minutes), and its going is the only event that says so."""
    namespace, ref = namespace_of(obj), controller_ref(obj)
    if not namespace or ref is None or not is_ref_to(ref, constants.GROUP, constants.KIND):
        return None
    key = f"{namespace}/{ref.get('name')}"
    current = mpijobs.get(key)
    if current is None or uid_of(current) == ref.get("uid"):
        return None
    return key


class EventHandlers:
    """Binds the mapping to the stores and the queue and registers it on informers."""

    def __init__(self, enqueue: Enqueue, *, mpijobs: ObjectGetter, jobs: ObjectGetter) -> None:
        self.enqueue = enqueue
        self.mpijobs = mpijobs
        self.jobs = jobs

    # --- MPIJobs -------------------------------------------------------------------------------
    def on_mpijob(self, obj: KubeObject) -> None:
        self.enqueue(mpijob_key(obj))

    def on_mpijob_update(self, old: KubeObject, new: KubeObject) -> None:
        if mpijob_update_matters(old, new):
            self.enqueue(mpijob_key(new))

    # --- children ------------------------------------------------------------------------------
    def on_child(self, obj: KubeObject) -> None:
        key = owner_key(obj, mpijobs=self.mpijobs, jobs=self.jobs)
        if key is not None:
            self.enqueue(key)

    def on_child_update(self, old: KubeObject, new: KubeObject) -> None:
        key = owner_key(new, mpijobs=self.mpijobs, jobs=self.jobs)
        old_key = owner_key(old, mpijobs=self.mpijobs, jobs=self.jobs)
        # An ownerReference can change (adoption, orphaning): both the old and the new owner care.
        for k in dict.fromkeys((key, old_key)):
            if k is not None:
                self.enqueue(k)

    def register_mpijobs(self, informer: Informer) -> None:
        informer.add_event_handler(
            on_add=self.on_mpijob, on_update=self.on_mpijob_update, on_delete=self.on_mpijob
        )

    def on_child_delete(self, obj: KubeObject) -> None:
        key = owner_key(obj, mpijobs=self.mpijobs, jobs=self.jobs) or successor_key(
            obj, mpijobs=self.mpijobs
        )
        if key is not None:
            self.enqueue(key)

    def on_job_update(self, old: KubeObject, new: KubeObject) -> None:
        if job_update_matters(old, new):
            self.on_child_update(old, new)

    def register_jobs(self, informer: Informer) -> None:
        informer.add_event_handler(
            on_add=self.on_child, on_update=self.on_job_update, on_delete=self.on_child_delete
        )

    def register_children(self, informer: Informer) -> None:
        informer.add_event_handler(
            on_add=self.on_child, on_update=self.on_child_update, on_delete=self.on_child_delete
        )

    # --- pods ----------------------------------------------------------------------------------
    def on_pod_update(self, old: KubeObject, new: KubeObject) -> None:
        if not lost_pod(old, new):
            if pod_update_matters(old, new):
                self.on_child_update(old, new)
            return
        key = owner_key(new, mpijobs=self.mpijobs, jobs=self.jobs)
        if key is not None:
            self.enqueue(key, urgent=True)

    def on_pod_delete(self, obj: KubeObject) -> None:
        key = owner_key(obj, mpijobs=self.mpijobs, jobs=self.jobs)
        if key is not None:
            self.enqueue(key, urgent=lost_pod(obj, None))
        elif (successor := successor_key(obj, mpijobs=self.mpijobs)) is not None:
            self.enqueue(successor)

    def register_pods(self, informer: Informer) -> None:
        informer.add_event_handler(
            on_add=self.on_child, on_update=self.on_pod_update, on_delete=self.on_pod_delete
        )
