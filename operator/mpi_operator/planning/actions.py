"""The vocabulary of a plan: typed write actions on one job's children, their phases, and the Plan.

Every write of a sync is an action here, and the one `reconcile.applier.Applier` sends them; actions
say *what* to send, never how. Objects inside actions may hold Secret data, so no action shows its
object in a repr or in `describe()`; log `describe()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal

from mpi_operator import reasons
from mpi_operator.objects import KubeObject

PropagationPolicy = Literal["Background", "Foreground", "Orphan"]


class Phase(IntEnum):
    """When an action is sent within its sync: a plan holds its actions in phase order.

    Elastic writes are only safe after the ones before them succeeded: the script drops a host (and
    the launcher is told) before its pod is stamped draining, the stamp comes before the delete, and
    new workers come last. Stopping at any point (a conflict, an error, a crash) leaves a state the
    next sync continues from (the published state names the hosts the script last dropped).
    """

    DISCOVERY = 1
    """Service, ConfigMap (hostfile, discover_hosts.sh, the published elastic state), Secret,
    PodGroup."""
    ANNOUNCE = 2
    """Elastic: the launcher pod annotated with the script's revision, so the kubelet refreshes it
    now."""
    DRAIN = 3
    """Elastic: drain annotations on worker pods the script has just dropped (or will list again):
    after the script, so a thousand of them do not hold its edit back."""
    RELEASE = 4
    """Elastic: workers Horovod has let go (scaled in, or replaced) deleted with a uid
    precondition."""
    WORKLOAD = 5
    """Worker pods (excess deleted, missing created), the launcher Job, suspend/resume, clean-up."""
    STOP = 6
    """Elastic: a failed job's launcher Job given its deadline, once the clean-up is sent."""


@dataclass(frozen=True)
class ObjectRef:
    """Which object: apiVersion, kind, namespace and name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, api_version: str = "", kind: str = "") -> ObjectRef:
        """The ref of `obj`; objects from LIST responses lack apiVersion/kind, so callers may supply
        them."""
        metadata = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion") or api_version),
            kind=str(obj.get("kind") or kind),
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Create:
    """POST `obj`; 409 AlreadyExists means a stale cache and is not an error (deterministic
    names)."""

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef
    phase: Phase = Phase.WORKLOAD

    @classmethod
    def of(cls, obj: KubeObject, phase: Phase = Phase.WORKLOAD) -> Create:
        return cls(obj=obj, ref=ObjectRef.of(obj), phase=phase)

    def describe(self) -> str:
        return f"create {self.ref}"


@dataclass(frozen=True)
class Update:
    """PUT `obj`: a copy of the observed object with only our fields changed.

    `obj.metadata.resourceVersion` is the observed one, so a concurrent change fails with 409
    Conflict and the key is requeued against a fresher cache (upstream uses Update everywhere it
    writes a child). `after_previous_write`: this follows another write to the same object in the
    same plan (the launcher Job's status, then its spec, on resume); the applier must put the
    resourceVersion that write returned into `obj`, as upstream does with the object UpdateStatus
    returns.
    """

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef
    fields: tuple[str, ...] = ()
    """The owned fields that differ (for logs and tests)."""
    after_previous_write: bool = False
    phase: Phase = Phase.WORKLOAD

    @classmethod
    def of(cls, obj: KubeObject, *fields: str, after_previous_write: bool = False) -> Update:
        return cls(
            obj=obj, ref=ObjectRef.of(obj), fields=fields, after_previous_write=after_previous_write
        )

    def describe(self) -> str:
        return f"update {self.ref} ({', '.join(self.fields)})"


@dataclass(frozen=True)
class UpdateStatus:
    """PUT the status subresource with `obj` (a copy of the observed object, status changed)."""

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef
    fields: tuple[str, ...] = ()
    phase: Phase = Phase.WORKLOAD

    @classmethod
    def of(cls, obj: KubeObject, *fields: str) -> UpdateStatus:
        return cls(obj=obj, ref=ObjectRef.of(obj), fields=fields)

    def describe(self) -> str:
        return f"update {self.ref} status ({', '.join(self.fields)})"


@dataclass(frozen=True)
class Delete:
    """DELETE with a uid precondition, so a same-named successor is never deleted by mistake.

    404 NotFound is success (already gone).
    """

    ref: ObjectRef
    uid: str | None
    propagation_policy: PropagationPolicy = "Background"
    phase: Phase = Phase.WORKLOAD
    why: str = ""
    """For the log line: what made the pod go (an elastic scale-in or replacement)."""
    grace_period_seconds: int | None = None
    """0: a force delete, of a pod whose kubelet no longer answers (elastic/replacement.py)."""

    def describe(self) -> str:
        force = " --force" if self.grace_period_seconds == 0 else ""
        return f"delete{force} {self.ref}" + (f" ({self.why})" if self.why else "")


@dataclass(frozen=True)
class Patch:
    """JSON merge patch of a few fields of an object the job does not template (a pod's annotations,
    the launcher Job's deadline). No resourceVersion: the fields are ours alone, so a concurrent
    change elsewhere in the object must not make it fail. 404 NotFound means there is nothing left
    to patch: skipped, and its `events` are not recorded."""

    ref: ObjectRef
    patch: Mapping[str, Any] = field(compare=False)
    phase: Phase
    why: str
    events: tuple[reasons.Event, ...] = ()
    """Recorded on the MPIJob when the patch was written."""

    def describe(self) -> str:
        return f"patch {self.ref} ({self.why})"


Action = Create | Update | UpdateStatus | Delete | Patch


@dataclass(frozen=True)
class Conflict:
    """An object with one of our names that this job does not control: never adopted, never
    overwritten."""

    ref: ObjectRef

    @property
    def reason(self) -> str:
        return reasons.ERR_RESOURCE_EXISTS

    @property
    def message(self) -> str:
        """The Warning event's message (upstream `MessageResourceExists`)."""
        return reasons.resource_exists_message(self.ref.name, self.ref.kind)


@dataclass(frozen=True)
class Plan:
    """What one reconcile should write, in phase order.

    As upstream stops at the first foreign object, `actions` holds only the steps before it; a plan
    with conflicts is a failed sync (Warning `ErrResourceExists`, requeue with backoff, no status
    write).
    """

    actions: tuple[Action, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    excess_workers: tuple[int, ...] = ()
    """Indices of live workers at or above the desired count, highest first (the elastic pacing's
    input); deleted by this plan only when `plan(..., delete_excess_workers=True)`."""
    waiting_for_workers: bool = False
    """The launcher Job is missing and held back by `launcherCreationPolicy:
    WaitForWorkersReady`."""
    deferred_workers: int = 0
    """Missing workers left out of this plan (beyond the sync's window, `planning.window`): the sync
    requeues itself for them, and the launcher Job is created once none is left."""
    events: tuple[reasons.Event, ...] = ()
    """Events to record once the actions succeed (upstream's SetPodTemplateRestartPolicy warning,
    and SSHPortUnknown; both come with the launcher Job's creation, so once per job)."""
    urgent: bool = False
    """The DISCOVERY and ANNOUNCE writes skip the client's request queue: the script drops hosts
    that can no longer run, and Horovod keeps trying them until it sees the new script."""

    def __post_init__(self) -> None:
        phases = [action.phase for action in self.actions]
        if phases != sorted(phases):
            raise ValueError(f"plan actions out of phase order: {self.describe()}")

    @property
    def empty(self) -> bool:
        """Nothing to write and nothing wrong: the job is converged."""
        return not self.actions and not self.conflicts

    def describe(self) -> list[str]:
        return [action.describe() for action in self.actions]


@dataclass(frozen=True)
class ElasticWrites:
    """What an elastic job's sync adds to its plan (built by the pure
    `mpi_operator.elastic.sync`)."""

    actions: tuple[Action, ...] = ()
    """DRAIN, ANNOUNCE, RELEASE and STOP actions: the planner places them among its own."""
    paces_scale_in: bool = False
    """The elastic step deletes excess workers (drained first, RELEASE); the planner only lists
    them."""
    launcher_ready_workers: int | None = None
    """How many Ready workers `WaitForWorkersReady` waits for (minReplicas), instead of every
    one."""
    urgent: bool = False
    """See `Plan.urgent`."""
