"""The vocabulary of a plan: typed write actions on one job's children, conflicts, and the Plan itself.

Actions say *what* to send, never how (lightkube's split): the applier in the controller maps `ref` to a
REST resource and performs the call. Objects inside actions may hold Secret data, so no action shows
its object in a repr or in `describe()`; log `describe()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mpi_operator import reasons
from mpi_operator.desired.naming import KubeObject

PropagationPolicy = Literal["Background", "Foreground", "Orphan"]


@dataclass(frozen=True)
class ObjectRef:
    """Which object: apiVersion, kind, namespace and name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, api_version: str = "", kind: str = "") -> ObjectRef:
        """The ref of `obj`; objects from LIST responses lack apiVersion/kind, so callers may supply them."""
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
    """POST `obj`; 409 AlreadyExists means a stale cache and is not an error (deterministic names)."""

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef

    @classmethod
    def of(cls, obj: KubeObject) -> Create:
        return cls(obj=obj, ref=ObjectRef.of(obj))

    def describe(self) -> str:
        return f"create {self.ref}"


@dataclass(frozen=True)
class Update:
    """PUT `obj`: a copy of the observed object with only our fields changed.

    `obj.metadata.resourceVersion` is the observed one, so a concurrent change fails with 409 Conflict
    and the key is requeued against a fresher cache (upstream uses Update everywhere it writes a child).
    `after_previous_write`: this follows another write to the same object in the same plan (the launcher
    Job's status, then its spec, on resume); the applier must put the resourceVersion that write returned
    into `obj`, as upstream does with the object UpdateStatus returns.
    """

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef
    fields: tuple[str, ...] = ()
    """The owned fields that differ (for logs and tests)."""
    after_previous_write: bool = False

    @classmethod
    def of(cls, obj: KubeObject, *fields: str, after_previous_write: bool = False) -> Update:
        return cls(obj=obj, ref=ObjectRef.of(obj), fields=fields, after_previous_write=after_previous_write)

    def describe(self) -> str:
        return f"update {self.ref} ({', '.join(self.fields)})"


@dataclass(frozen=True)
class UpdateStatus:
    """PUT the status subresource with `obj` (a copy of the observed object, status changed)."""

    obj: KubeObject = field(repr=False, compare=False)
    ref: ObjectRef
    fields: tuple[str, ...] = ()

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

    def describe(self) -> str:
        return f"delete {self.ref}"


Action = Create | Update | UpdateStatus | Delete


@dataclass(frozen=True)
class Conflict:
    """An object with one of our names that this job does not control: never adopted, never overwritten."""

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
    """What one reconcile should write, in order.

    As upstream stops at the first foreign object, `actions` holds only the steps before it; a plan with
    conflicts is a failed sync (Warning `ErrResourceExists`, requeue with backoff, no status write).
    """

    actions: tuple[Action, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    excess_workers: tuple[int, ...] = ()
    """Indices of live workers at or above the desired count, highest first (the elastic pacing's input);
    deleted by this plan only when `plan(..., delete_excess_workers=True)`."""
    waiting_for_workers: bool = False
    """The launcher Job is missing and held back by `launcherCreationPolicy: WaitForWorkersReady`."""
    events: tuple[reasons.Event, ...] = ()
    """Events to record once the actions succeed (upstream's SetPodTemplateRestartPolicy warning, and
    SSHPortUnknown; both come with the launcher Job's creation, so once per job)."""

    @property
    def empty(self) -> bool:
        """Nothing to write and nothing wrong: the job is converged."""
        return not self.actions and not self.conflicts

    def describe(self) -> list[str]:
        return [action.describe() for action in self.actions]
