"""Executes a `planning.Plan` through `Kube`: one API call per action, in the plan's (phase) order;
the only writer of a job's children (`docs/architecture.md`, "The write path"). Each answer:
  * Create -> 409: success if the object there is ours (GET it: a foreign one becomes a `Conflict`,
    never adopted; one of ours without the watch label gets it added);
  * Update with `after_previous_write` -> the resourceVersion the previous write to it returned;
  * Delete -> uid precondition; 404 and a failed precondition are success; a uid deleted once is not
    deleted again while the cache still shows it (`DeletedRecently`);
  * Patch -> 404 means nothing is left to patch: skipped, its events not recorded;
  * an `urgent` plan sends its DISCOVERY and ANNOUNCE actions ahead of the client's queue;
  * anything else propagates (backoff), a failed Pod or launcher Job create reported on the MPIJob.
API `Warning` headers reach their write through a context variable (one `Kube`, one callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mpi_operator import reasons
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.objects import KubeObject
from mpi_operator.planning import (
    Action,
    Conflict,
    Create,
    Delete,
    ObjectRef,
    Patch,
    Phase,
    Plan,
    Update,
    UpdateStatus,
)
from mpi_operator.reasons import Event

log = logging.getLogger(__name__)

_RESOURCES: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (
        resources.POD,
        resources.SERVICE,
        resources.CONFIG_MAP,
        resources.SECRET,
        resources.JOB,
        resources.POD_DISRUPTION_BUDGET,
        resources.VOLCANO_POD_GROUP,
        resources.SCHEDULER_PLUGINS_POD_GROUP,
    )
}

_URGENT_PHASES: Final = frozenset({Phase.DISCOVERY, Phase.ANNOUNCE})

_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "api_warnings", default=None
)


def collect_warning(text: str) -> None:
    """`Kube.on_warning`: hands the warning to the write that is running in this context, if any."""
    sink = _warnings.get()
    if sink is not None:
        sink.append(text)


def resource_for(ref: ObjectRef) -> Resource:
    try:
        return _RESOURCES[(ref.api_version, ref.kind)]
    except KeyError:
        raise ValueError(f"no REST resource known for {ref.api_version} {ref.kind}") from None


@dataclass
class Applied:
    """What applying a plan found: foreign objects hidden from the stores, and API warnings per
    object."""

    conflicts: list[Conflict] = field(default_factory=list)
    warnings: list[tuple[ObjectRef, str]] = field(default_factory=list)
    written: dict[ObjectRef, KubeObject] = field(default_factory=dict)
    """The objects the API returned for each write (the last one per object)."""
    events: list[Event] = field(default_factory=list)
    """The events of the actions that were written (`Patch.events`)."""
    stopped_in: Phase | None = None
    """The phase of the action whose conflict stopped the plan; None when every action was sent."""
    abandoned: bool = False
    """The job went away while its plan was sent: the rest was not."""

    def completed(self, phase: Phase) -> bool:
        """Every action of `phase` (and of the phases before it) was sent."""
        return self.stopped_in is None or self.stopped_in > phase


class DeletedRecently:
    """Uids this process deleted successfully, remembered for `ttl` seconds (see the module
    docstring)."""

    def __init__(self, clock: Callable[[], float], ttl: float = 300.0) -> None:
        self.ttl = ttl
        self.clock = clock
        self._deleted: dict[str, float] = {}

    def __contains__(self, uid: object) -> bool:
        at = self._deleted.get(uid) if isinstance(uid, str) else None
        return at is not None and self.clock() - at < self.ttl

    def add(self, uid: str) -> None:
        now = self.clock()
        if len(self._deleted) > 10_000:
            self._deleted = {u: t for u, t in self._deleted.items() if now - t < self.ttl}
        self._deleted[uid] = now


SLOW_START_MAX: Final = 32
"""Pod creates, drain marks and deletes go out in batches of 1, 2, 4, ... up to this (client-go's
slow start): a job whose creates all fail (a quota, a webhook) costs one request, a healthy one few
round trips, and no more than a batch is in flight when the job is deleted. One at a time, the
1,000 drain marks of a scale-in took 8 s and its deletes 28 s (bench/bigjob.py)."""


def _in_batches(action: Action) -> bool:
    return isinstance(action, Create | Patch | Delete) and action.ref.kind == "Pod"


def _batch(actions: Sequence[Action], start: int, size: int) -> Sequence[Action]:
    """The next actions to send together: up to `size` pod writes of one verb and phase, anything
    else alone."""
    first = actions[start]
    if not _in_batches(first):
        return actions[start : start + 1]
    end = start + 1
    while (
        end < len(actions)
        and end - start < size
        and _in_batches(actions[end])
        and type(actions[end]) is type(first)
        and actions[end].phase == first.phase
    ):
        end += 1
    return actions[start:end]


Report = Callable[[str, str, str], None]
"""(type, reason, message) -> records an Event on the MPIJob."""


class Applier:
    """Sends the actions of one job's plan; `apply` stops at the first conflict, as upstream does,
    and as soon as `is_current()` says the job is gone (deleted, or replaced by one with a new uid):
    its children would only be garbage for the collector."""

    def __init__(
        self,
        kube: Kube,
        job: MPIJob,
        watch_labels: Mapping[str, str],
        report: Report,
        deleted: DeletedRecently,
        is_current: Callable[[], bool] = lambda: True,
        created: Callable[[KubeObject], None] = lambda obj: None,
    ) -> None:
        self.kube = kube
        self.job = job
        self.watch_labels = dict(watch_labels)
        self.report = report
        self.deleted = deleted
        self.is_current = is_current
        self.created = created
        """Told of every object the API created, at once: a sync that fails later must not lose
        them."""

    async def apply(self, plan: Plan) -> Applied:
        applied = Applied()
        actions = plan.actions
        start, size, previous = 0, 1, None
        while start < len(actions):
            if not self.is_current():
                applied.abandoned = True
                break
            first = actions[start]
            if (type(first), first.phase) != previous:
                size = 1  # each verb and phase starts slow: its first request may be refused
            previous = (type(first), first.phase)
            batch = _batch(actions, start, size)
            if len(batch) == 1:
                results: list[KubeObject | BaseException | None] = [
                    await self._send(batch[0], plan, applied)
                ]
            else:
                sends = (self._send(action, plan, applied) for action in batch)
                results = await asyncio.gather(*sends, return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException)]
            for action, result in zip(batch, results, strict=True):
                if result is not None and not isinstance(result, BaseException):
                    applied.written[action.ref] = result
                    if isinstance(action, Patch):
                        applied.events.extend(action.events)
            if failures:
                raise failures[0]
            if applied.conflicts:
                applied.stopped_in = batch[0].phase
                break
            start += len(batch)
            size = min(size * 2, SLOW_START_MAX) if _in_batches(batch[0]) else 1
        return applied

    async def _send(self, action: Action, plan: Plan, applied: Applied) -> KubeObject | None:
        sink: list[str] = []
        token = _warnings.set(sink)
        urgent = plan.urgent and action.phase in _URGENT_PHASES
        try:
            with self.kube.urgent() if urgent else contextlib.nullcontext():
                return await self._one(action, applied)
        finally:
            _warnings.reset(token)
            applied.warnings.extend((action.ref, text) for text in sink)

    async def _one(self, action: Action, applied: Applied) -> KubeObject | None:
        resource = resource_for(action.ref)
        ref = action.ref
        if not isinstance(action, Delete):
            log.info("%s", action.describe())
        if isinstance(action, Create):
            return await self._create(resource, action, applied)
        if isinstance(action, Update):
            obj = action.obj
            previous = applied.written.get(ref)
            if action.after_previous_write and previous is not None:
                obj = copy.deepcopy(obj)
                obj["metadata"]["resourceVersion"] = previous["metadata"]["resourceVersion"]
            return await self.kube.replace(resource, obj)
        if isinstance(action, UpdateStatus):
            return await self.kube.replace(resource, action.obj, subresource="status")
        if isinstance(action, Patch):
            try:
                return await self.kube.patch(
                    resource, ref.name, dict(action.patch), namespace=ref.namespace
                )
            except errors.NotFound:
                log.info("%s: gone, nothing to patch", action.describe())
                return None
        assert isinstance(action, Delete)
        forced = action.grace_period_seconds is not None
        if action.uid is not None and action.uid in self.deleted and not forced:
            return None
        log.info("%s", action.describe())
        try:
            await self.kube.delete(
                resource,
                ref.name,
                namespace=ref.namespace,
                uid=action.uid,
                propagation_policy=action.propagation_policy,
                grace_period_seconds=action.grace_period_seconds,
            )
        except errors.NotFound:
            pass
        except errors.Conflict:
            log.info(
                "%s: the uid precondition failed, a successor holds the name", action.describe()
            )
        if action.uid is not None:
            self.deleted.add(action.uid)
        return None

    async def _create(
        self, resource: Resource, action: Create, applied: Applied
    ) -> KubeObject | None:
        ref = action.ref
        try:
            obj = await self.kube.create(resource, action.obj)
        except errors.AlreadyExists:
            pass
        except errors.KubeError as exc:
            if ref.kind == "Pod":
                self.report(
                    reasons.WARNING,
                    reasons.MPIJOB_FAILED,
                    reasons.worker_create_failed_message(str(exc)),
                )
            elif ref.kind == "Job":
                self.report(
                    reasons.WARNING,
                    reasons.MPIJOB_FAILED,
                    reasons.launcher_create_failed_message(str(exc)),
                )
            raise
        else:
            self.created(obj)
            return obj
        existing = await self.kube.get(resource, ref.name, ref.namespace)
        if not naming.is_controlled_by(existing, self.job):
            applied.conflicts.append(Conflict(ref))
            return None
        labels: Mapping[str, Any] = existing.get("metadata", {}).get("labels") or {}
        missing = {k: v for k, v in self.watch_labels.items() if labels.get(k) != v}
        if missing:
            # Ours but invisible to the label-filtered informer: label it so the cache sees it.
            return await self.kube.patch(
                resource, ref.name, {"metadata": {"labels": missing}}, namespace=ref.namespace
            )
        return existing
