"""The cluster's state and the apiserver's verb semantics, in process (no HTTP here).

The HTTP layer and the simulated controllers (kubelet, Job controller, GC) both call these verbs.
Objects in and out are plain JSON dicts; every returned object is a copy the caller may mutate,
except where a caller asks for the stored one (`copy_object(s)=False`, `Written.stored`) and in
listeners: stored objects are never changed after their commit, so those are shared and read only.
Every verb is synchronous apart from `watch`, so each write is atomic on the event loop. Refusals
raise `kubesim.errors.StatusError`. Kind-specific behaviour (pod binding and grace, namespace
lifecycle, CRD status) comes from `kubesim.builtins`; storage, history and watch buffers from
`kubesim.store`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Literal

import yaml

from kubesim import admission, builtins, errors, nodes, patch, pdb, selectors
from kubesim.admission import priority
from kubesim.registry import Registry, ResourceType, StorageKey, set_path
from kubesim.scheduling import filters
from kubesim.settings import SimSettings
from kubesim.store import (
    Change,
    EventType,
    Store,
    WatchBatch,
    WatchEvent,
    clone,
    flatten,
    watch_batches,
)

__all__ = [
    "Cluster",
    "DeleteOptions",
    "EventType",
    "Listener",
    "WatchEvent",
    "WriteOptions",
    "Written",
]

log = logging.getLogger(__name__)


_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's SimpleNameGenerator alphabet
_SYSTEM_FIELDS = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


@dataclass(frozen=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: Literal["Ignore", "Warn", "Strict"] = "Warn"
    field_manager: str = ""
    user_agent: str = ""


_DEFAULT_OPTIONS = WriteOptions()


@dataclass(frozen=True)
class DeleteOptions:
    propagation_policy: Literal["Background", "Foreground", "Orphan"] | None = None
    grace_period_seconds: int | None = None
    preconditions: dict[str, str] | None = None  # {"uid": ..., "resourceVersion": ...}
    dry_run: bool = False


@dataclass
class Written:
    """Result of a write: the stored object and the admission warnings (sent as `Warning`
    headers)."""

    stored: dict[str, Any]
    """The object as stored (or as it would be, for a dry run), shared with the store: read only."""
    warnings: list[str] = field(default_factory=list)
    created: bool = False
    deleted: bool = False
    """For deletes: True when the object is gone, False while finalizers or a grace period keep
    it."""

    @cached_property
    def object(self) -> dict[str, Any]:
        """A private copy of `stored`, made on first use: most writers (the controllers, the HTTP
        layer) never look at the result or only serialise it."""
        copied: dict[str, Any] = clone(self.stored)
        return copied


Warnings = list[str]

# Listener(event_type, resource_type, new_or_final_object, old_object_or_None); called synchronously
# after every committed change, in commit order. Controllers use it to learn about changes cheaply.
# The objects are the stored ones (not copies, so a change costs no copy per listener): read only.
Listener = Callable[[EventType, ResourceType, dict[str, Any], dict[str, Any] | None], None]


_last_stamp: tuple[datetime, str] = (datetime.min, "")


def _timestamp(moment: datetime) -> str:
    """RFC 3339 at second precision (metav1.Time), formatted once per second of creates."""
    global _last_stamp
    second = moment.replace(microsecond=0, tzinfo=None)  # naive: equal when the fields shown are
    if second != _last_stamp[0]:
        _last_stamp = (second, moment.strftime(builtins.TIMESTAMP_FORMAT))
    return _last_stamp[1]


def _uid() -> str:
    """A random (version 4) UUID, as `str(uuid.uuid4())` writes it, for a third of its cost."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


class Cluster:
    """All objects of the simulated cluster, with apiserver semantics (StatusError on refusal)."""

    registry: Registry
    settings: SimSettings

    def __init__(
        self, settings: SimSettings | None = None, *, now: Callable[[], datetime] | None = None
    ) -> None:
        self.settings = settings or SimSettings()
        self.registry = Registry(builtins.BUILTIN_TYPES)
        self.store = Store(history_size=self.settings.history_size)
        self.now: Callable[[], datetime] = now or (lambda: datetime.now(UTC))  # None for tests
        self._listeners: list[Listener] = []
        self._undelivered: deque[Change] = deque()
        self._dispatching = False
        self._rng = random.Random()
        shapes = self.settings.node_shapes()
        self._bind_at_admission = shapes[0].name if nodes.is_default_shape(shapes) else ""
        for name in builtins.INITIAL_NAMESPACES:
            self.create(builtins.NAMESPACES, None, {"metadata": {"name": name}})
        stamp = _timestamp(self.now())
        for index, shape in enumerate(self.settings.node_shapes()):
            self.create(builtins.NODES, None, nodes.node_object(shape, index, stamp))
        for priority_class in builtins.INITIAL_PRIORITY_CLASSES:
            self.create(builtins.PRIORITY_CLASSES, None, priority_class)

    # --- reads -----------------------------------------------------------------------------
    def get(
        self, rt: ResourceType, namespace: str | None, name: str, *, copy_object: bool = True
    ) -> dict[str, Any]:
        """The object (404 when missing); `copy_object=False` shares the stored one: read only."""
        obj = self._require(rt, namespace, name)
        return self._present(rt, obj) if copy_object else self._relabel(rt, obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int | None = None,
        continue_token: str | None = None,
        copy_objects: bool = True,
    ) -> dict[str, Any]:
        """A `<Kind>List` with metadata.resourceVersion (and `continue` when limited).

        `copy_objects=False` shares the stored items with the caller, who must then not mutate
        them."""
        match = self.matcher(rt, label_selector, field_selector)
        if continue_token:
            snapshot, offset, snap_id = self.store.load_snapshot(continue_token)
            items, rv = list(snapshot.items), snapshot.rv
        else:
            scope = namespace if rt.namespaced else None
            items = [o for o in self.store.objects(rt.storage_key, scope or None) if match(o)]
            rv, offset, snap_id = self.store.resource_version, 0, 0
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit is not None and limit > 0 and len(items) - offset > limit:
            if not snap_id:
                snap_id = self.store.save_snapshot(items)
            metadata["continue"] = self.store.continue_token(snap_id, offset + limit, rv)
            metadata["remainingItemCount"] = len(items) - offset - limit
            page = items[offset : offset + limit]
        else:
            page = items[offset:]
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": metadata,
            "items": [(self._present if copy_objects else self._relabel)(rt, o) for o in page],
        }

    def matcher(
        self, rt: ResourceType, label_selector: str, field_selector: str
    ) -> Callable[[dict[str, Any]], bool]:
        """A predicate for label+field selectors; 400 BadRequest when either does not parse."""
        try:
            labels = selectors.parse_label_selector(label_selector) if label_selector else None
            fields = (
                selectors.parse_field_selector(field_selector, kind=rt.kind)
                if field_selector
                else None
            )
        except selectors.SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc

        def match(obj: dict[str, Any]) -> bool:
            if labels is not None and not labels.matches(
                (obj.get("metadata") or {}).get("labels") or {}
            ):
                return False
            return fields is None or fields.matches(obj)

        return match

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = False,
        send_initial_events: bool = False,
        copy_objects: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Changes as watch events, like the apiserver's watch cache (see
        `kubesim.store.watch_batches`).

        A bad selector or resourceVersion raises 400 at once. The watch itself starts when first
        iterated (so rv ""/"0" lists the state of that moment; rv N replays from history, so nothing
        is lost). An expired rv yields one ERROR event (410 Expired Status) and ends, as the
        apiserver does inside a 200 stream. Close the iterator (`aclose()`) when done; do not cancel
        a pending `anext()`, which ends an async generator for good. `copy_objects=False` shares
        stored objects with the caller, who must then not mutate them (the HTTP layer only
        serialises them).
        """
        return flatten(
            self.watch_batches(
                rt,
                namespace,
                resource_version=resource_version,
                label_selector=label_selector,
                field_selector=field_selector,
                allow_bookmarks=allow_bookmarks,
                send_initial_events=send_initial_events,
                copy_objects=copy_objects,
            )
        )

    def watch_batches(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        allow_bookmarks: bool = False,
        send_initial_events: bool = False,
        copy_objects: bool = True,
    ) -> AsyncIterator[WatchBatch]:
        """`watch` in batches: every event available at once comes in one list (one write for
        HTTP)."""
        match = self.matcher(rt, label_selector, field_selector)
        return watch_batches(
            self.store,
            rt,
            namespace if rt.namespaced and namespace else None,
            resource_version=resource_version or "",
            match=match,
            allow_bookmarks=allow_bookmarks,
            send_initial_events=send_initial_events,
            bookmark_seconds=self.settings.bookmark_seconds,
            present=(lambda o: self._present(rt, o))
            if copy_objects
            else (lambda o: self._relabel(rt, o)),
        )

    # --- writes ----------------------------------------------------------------------------
    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: dict[str, Any],
        *,
        opts: WriteOptions | None = None,
        owned: bool = False,
        decoded: bool = False,
    ) -> Written:
        """Creates `body`. With `owned`, the caller hands `body` over (a freshly decoded request):
        it is used, not copied, and must not be touched afterwards. `decoded` (implies `owned`;
        built-in kinds): kubesim's own controller built `body` in the shape decoding leaves, so
        admission does not walk it again (defaults and validation still apply; see
        `admission.admit`)."""
        opts = opts or _DEFAULT_OPTIONS
        obj = self._incoming(rt, body, private=owned or decoded)
        meta = _meta(obj)
        ns = self._writable_namespace(rt, namespace, meta, creating=True)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for name in _SYSTEM_FIELDS:
            meta.pop(name, None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                why = "Required value: name or generateName is required"
                raise errors.field_invalid(
                    rt.kind, rt.group, "", "metadata.name", why, reason="FieldValueRequired"
                )
            meta["name"] = self._generate_name(rt, ns, str(meta["generateName"]))
        name = str(meta["name"])
        if self.store.get(rt.storage_key, ns, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        now = self.now()
        meta["uid"] = _uid()
        meta["creationTimestamp"] = _timestamp(now)
        meta["generation"] = 1
        if builtins.is_type(rt, builtins.CRDS) and (problems := builtins.crd_problems(obj)):
            raise errors.invalid(rt.kind, rt.group, name, problems)
        builtins.prepare_create(rt, obj, node_name=self._admission_node(rt, obj), now=now)
        self._admit_priority(rt, obj, None)
        obj, warnings = self._admit("CREATE", rt, obj, None, opts, None, decoded=decoded)
        if not opts.dry_run:
            self._commit("ADDED", rt, obj, None)
            if builtins.is_type(rt, builtins.CRDS):
                self.registry.register_crd(obj)
        return Written(self._relabel(rt, obj), warnings, created=True)

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
        opts: WriteOptions | None = None,
        owned: bool = False,
        decoded: bool = False,
    ) -> Written:
        """Replaces the object (or its `subresource`) with `body`; `owned` and `decoded` as for
        `create`."""
        opts = opts or _DEFAULT_OPTIONS
        owned = owned or decoded
        current = self._require(rt, namespace, name)
        if subresource == "scale":
            return self._update_scale(rt, current, body, opts)
        self._check_subresource(rt, subresource)
        if subresource == "status" and not owned and isinstance(body, dict):
            # Only the status and the metadata's top level of a /status body are used or changed:
            # copying just those spares a controller's status write a copy of the whole object.
            meta = body.get("metadata")
            body = {**body, "metadata": dict(meta) if isinstance(meta, dict) else meta}
            if "status" in body:
                body["status"] = clone(body["status"])
            owned = True
        new = self._incoming(rt, body, private=owned)
        meta = _meta(new)
        body_rv = str(meta.get("resourceVersion") or "")
        current_rv = current["metadata"]["resourceVersion"]
        if body_rv and body_rv != current_rv:
            raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        if not body_rv and not builtins.allows_unconditional_update(rt):
            why = "Invalid value: 0x0: must be specified for an update"
            raise errors.field_invalid(rt.kind, rt.group, name, "metadata.resourceVersion", why)
        return self._write_update(rt, current, new, subresource, opts, decoded=decoded)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes,
        content_type: str,
        *,
        subresource: str | None = None,
        opts: WriteOptions | None = None,
    ) -> Written:
        opts = opts or _DEFAULT_OPTIONS
        media = (content_type or "").split(";")[0].strip().lower()
        current = self.store.get(rt.storage_key, self._scope(rt, namespace), name)
        if current is None and media == patch.APPLY_PATCH and subresource is None:
            return self._apply_create(rt, namespace, name, body, opts)
        current = self._require(rt, namespace, name)
        if subresource == "scale":
            scale = self._scale_of(rt, current)
            patched_scale = self._apply_patch(scale, body, media, kind="Scale", builtin=True)
            return self._update_scale(rt, current, patched_scale, opts)
        self._check_subresource(rt, subresource)
        patched = self._apply_patch(
            self._relabel(rt, current), body, media, kind=rt.kind, builtin=rt.builtin
        )
        meta = _meta(patched)
        patched_rv = str(meta.get("resourceVersion") or "")
        if patched_rv and patched_rv != current["metadata"]["resourceVersion"]:
            # A resourceVersion inside a patch is an optimistic lock (client-go's "guaranteed
            # update").
            raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        return self._write_update(
            rt, current, self._incoming(rt, patched, private=True), subresource, opts
        )

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        """Returns the object as it now is (deletionTimestamp set while finalizers remain) or as
        deleted."""
        return self.delete_object(rt, namespace, name, options=options).object

    def delete_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        options: DeleteOptions | None = None,
    ) -> Written:
        """`delete` with warnings and whether the object is gone (`Written.deleted`)."""
        options = options or DeleteOptions()
        current = self._require(rt, namespace, name)
        meta = current["metadata"]
        pre = options.preconditions or {}
        for key, what in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(key) and pre[key] != meta.get(key):
                raise errors.precondition_failed(
                    rt.plural, rt.group, name, what, pre[key], str(meta.get(key))
                )
        if builtins.is_type(rt, builtins.NAMESPACES) and name in builtins.UNDELETABLE_NAMESPACES:
            raise errors.forbidden(rt.plural, rt.group, name, "this namespace may not be deleted")
        warnings: Warnings = []
        policy: str | None = options.propagation_policy
        if policy is None and (policy := builtins.default_propagation(rt)) == "Orphan":
            warnings.append(builtins.JOB_ORPHAN_WARNING)
        grace = 0
        if builtins.is_type(rt, builtins.PODS):
            grace = builtins.pod_grace_seconds(current, options.grace_period_seconds)
        new = clone(current)
        finalizers: list[str] = list(new["metadata"].get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            # Already being deleted: idempotent, except that a pod's grace period may only get
            # shorter.
            shorter = options.grace_period_seconds is not None and grace < int(
                meta["deletionGracePeriodSeconds"] or 0
            )
            if not shorter and not builtins.deletion_complete(rt, current):
                return Written(self._relabel(rt, current), warnings)
        elif (wanted := builtins.POLICY_FINALIZERS.get(policy or "")) and wanted not in finalizers:
            finalizers.append(wanted)
        builtins.mark_deleting(rt, new, finalizers, self.now() + timedelta(seconds=grace), grace)
        if not builtins.deletion_complete(rt, new):
            if not options.dry_run:
                self._commit("MODIFIED", rt, new, current)
            return Written(self._relabel(rt, new), warnings)
        if not options.dry_run:
            self._remove(rt, current)
        return Written(self._relabel(rt, current), warnings, deleted=True)

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        """Deletes every matching object; returns a `<Kind>List` of them as the deletes left
        them."""
        listed = self.list(
            rt, namespace, label_selector=label_selector, field_selector=field_selector
        )
        items = []
        for item in listed["items"]:
            meta = item["metadata"]
            try:
                items.append(self.delete(rt, meta.get("namespace"), meta["name"], options=options))
            except errors.StatusError as exc:
                if exc.code != 404:
                    raise
        listed["items"] = items
        listed["metadata"] = {"resourceVersion": str(self.store.resource_version)}
        return listed

    def evict(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        *,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], int]:
        """`pods/eviction` (policy/v1 Eviction) as the eviction registry does it: the `Status`
        answer and its HTTP code. Terminal, Pending or terminating pods are deleted without a budget
        check; else the one PodDisruptionBudget selecting the pod must allow a disruption (429
        otherwise; 500 for more than one), is decremented and records the pod; then the pod gets
        `DisruptionTarget` and the graceful delete with the eviction's DeleteOptions. `dry_run` (the
        request's) changes nothing."""
        raw = body.get("deleteOptions") or {}
        url_name = (body.get("metadata") or {}).get("name")
        if url_name and url_name != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options = DeleteOptions(
            propagation_policy=raw.get("propagationPolicy"),
            grace_period_seconds=raw.get("gracePeriodSeconds"),
            preconditions=raw.get("preconditions"),
            dry_run=dry_run or bool(raw.get("dryRun")),
        )
        pod = self._require(rt, namespace, name)
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        success = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        terminal = phase in ("Succeeded", "Failed") or bool(meta.get("deletionTimestamp"))
        if terminal or phase == "Pending":
            self._evict_delete(rt, pod, options, pin_version=not terminal)
            return success, 201
        labels = meta.get("labels") or {}
        budgets = [
            b
            for b in self.store.objects(builtins.PDBS.storage_key, meta["namespace"])
            if pdb.selects(b, labels)
        ]
        if len(budgets) > 1:
            failure = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
            return {**failure, "message": pdb.MULTIPLE_BUDGETS, "code": 500}, 500
        pin_version = False
        if budgets:
            budget = budgets[0]
            status = budget.get("status") or {}
            healthy, desired = (
                int(status.get("currentHealthy") or 0),
                int(status.get("desiredHealthy") or 0),
            )
            always = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            if not pdb.is_ready(pod) and (always or 0 < desired <= healthy):
                # An unready pod whose loss leaves the budget whole goes without a decrement,
                # provided it has not become ready since (the resourceVersion precondition).
                pin_version = True
            else:
                decremented = pdb.check_and_decrement(budget, name, self.now())
                if not options.dry_run:
                    # The budget as read, so a concurrent change is a conflict, as the registry's
                    # is.
                    self.update(
                        builtins.PDBS,
                        meta["namespace"],
                        budget["metadata"]["name"],
                        {**budget, "metadata": dict(budget["metadata"]), "status": decremented},
                        subresource="status",
                        decoded=True,
                    )
        self._evict_delete(rt, pod, options, pin_version=pin_version)
        return success, 201

    def _evict_delete(
        self, rt: ResourceType, pod: dict[str, Any], options: DeleteOptions, *, pin_version: bool
    ) -> None:
        """addConditionAndDeletePod: `DisruptionTarget` (EvictionByEvictionAPI), then the delete;
        with `pin_version` and no resourceVersion precondition given, the pod's current one is
        required."""
        meta = pod["metadata"]
        pre = dict(options.preconditions or {})
        if pin_version and not pre.get("resourceVersion"):
            pre["resourceVersion"] = meta["resourceVersion"]
        if not options.dry_run:
            for key, what in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                if pre.get(key) and pre[key] != meta.get(key):
                    why = (
                        f"the {what} in the precondition ({pre[key]}) does not match the {what} in "
                        "record "
                        f"({meta.get(key)}). The object might have been "
                        + ("deleted and then recreated" if key == "uid" else "modified")
                    )
                    raise errors.conflict("Pod", "", meta["name"], why)
            status = dict(pod.get("status") or {})
            status["conditions"] = [
                *(c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"),
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastTransitionTime": _timestamp(self.now()),
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                },
            ]
            written = self.update(
                rt, meta["namespace"], meta["name"], {**pod, "status": status}, subresource="status"
            )
            if pre.get("resourceVersion"):
                pre["resourceVersion"] = written.stored["metadata"]["resourceVersion"]
        self.delete(
            rt,
            meta["namespace"],
            meta["name"],
            options=dataclasses.replace(options, preconditions=pre or None),
        )

    def bind(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        node: str,
        *,
        opts: WriteOptions | None = None,
    ) -> Written:
        """`pods/binding`: sets spec.nodeName (once) and `PodScheduled=True`, as the scheduler's
        bind."""
        current = self._require(rt, namespace, name)
        spec = current.get("spec") or {}
        if current["metadata"].get("deletionTimestamp"):
            why = f"pod {name} is being deleted, cannot be assigned to a host"
            raise errors.conflict("pods/binding", rt.group, name, why)
        if spec.get("nodeName"):
            why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            raise errors.conflict("pods/binding", rt.group, name, why)
        status = dict(current.get("status") or {})
        scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}
        scheduled["lastTransitionTime"] = _timestamp(self.now())
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        status["conditions"] = [scheduled, *conditions]
        new = {
            **current,
            "metadata": dict(current["metadata"]),
            "spec": {**spec, "nodeName": node},
            "status": status,
        }
        return self._write_update(
            rt, current, new, "binding", opts or _DEFAULT_OPTIONS, decoded=True
        )

    def _admission_node(self, rt: ResourceType, pod: dict[str, Any]) -> str:
        """The node a new pod is bound to as it is created: only in the default cluster (one node
        that never runs out), and only when the pod passes the scheduler's other filters there."""
        if not self._bind_at_admission or not builtins.is_type(rt, builtins.PODS):
            return ""
        spec = pod.get("spec")
        if not isinstance(spec, dict) or spec.get("nodeName"):
            return ""
        if (spec.get("schedulerName") or "default-scheduler") != "default-scheduler":
            return ""
        node = self.store.get(builtins.NODES.storage_key, "", self._bind_at_admission)
        if node is None or filters.placement_failure(spec, node) is not None:
            return ""
        return self._bind_at_admission

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return self._scale_of(rt, self._require(rt, namespace, name))

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    # --- helpers ---------------------------------------------------------------------------
    def _scope(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _require(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        if rt.namespaced and not namespace:
            raise errors.bad_request(
                "the server could not find the requested resource: namespace required"
            )
        obj = self.store.get(rt.storage_key, self._scope(rt, namespace), name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def _relabel(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as served in `rt`'s version (shallow: shares nested data with the
        store)."""
        if obj.get("apiVersion") == rt.api_version and obj.get("kind") == rt.kind:
            return obj
        return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}

    def _present(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        copied: dict[str, Any] = clone(obj)
        copied["apiVersion"] = rt.api_version
        copied["kind"] = rt.kind
        return copied

    def _storage_type(self, key: StorageKey, fallback: ResourceType) -> ResourceType:
        return self.registry.storage_type(*key) or fallback

    def _incoming(self, rt: ResourceType, body: Any, *, private: bool = False) -> dict[str, Any]:
        """A private copy of a request body (`body` itself when already `private`), checked against
        the endpoint's kind and stored version."""
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj: dict[str, Any] = body if private else clone(body)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                "version "
                f"({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"] = self._storage_type(rt.storage_key, rt).api_version
        obj["kind"] = rt.kind
        _meta(obj)
        return obj

    def _writable_namespace(
        self, rt: ResourceType, namespace: str | None, meta: dict[str, Any], *, creating: bool
    ) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        namespace = (
            namespace or body_ns
        )  # in-process callers may name the namespace in the body only
        if not namespace:
            raise errors.bad_request(
                "the server could not find the requested resource: namespace required"
            )
        if body_ns and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        meta["namespace"] = namespace
        if creating:
            ns_obj = self.store.get(builtins.NAMESPACES.storage_key, "", namespace)
            if ns_obj is None:
                raise errors.not_found("namespaces", "", namespace)
            if (ns_obj.get("status") or {}).get("phase") == "Terminating":
                err = errors.forbidden(
                    rt.plural,
                    rt.group,
                    str(meta.get("name") or meta.get("generateName") or ""),
                    f"unable to create new content in namespace {namespace} because it is being "
                    "terminated",
                )
                err.causes = [
                    {
                        "reason": "NamespaceTerminating",
                        "field": "metadata.namespace",
                        "message": f"namespace {namespace} is being terminated",
                    }
                ]
                raise err
        return namespace

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        for _ in range(8):
            candidate = prefix[:58] + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if self.store.get(rt.storage_key, namespace, candidate) is None:
                return candidate
        raise errors.already_exists(rt.plural, rt.group, prefix)

    def _check_subresource(self, rt: ResourceType, subresource: str | None) -> None:
        if subresource is None:
            return
        if subresource == "status" and rt.status_subresource:
            return
        if subresource == "finalize" and builtins.is_type(rt, builtins.NAMESPACES):
            return
        raise errors.not_found(f"{rt.plural}/{subresource}", rt.group, "")

    def _apply_patch(
        self, current: dict[str, Any], body: bytes, media: str, *, kind: str, builtin: bool
    ) -> dict[str, Any]:
        try:
            patched = patch.apply_patch(current, body, media, kind=kind, builtin=builtin)
        except patch.PatchError as exc:
            raise errors.StatusError(
                exc.code, errors.REASON_BY_CODE.get(exc.code, "BadRequest"), exc.message
            ) from exc
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch does not result in an object")
        return patched

    def _admit(
        self,
        operation: Literal["CREATE", "UPDATE"],
        rt: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        opts: WriteOptions,
        subresource: str | None,
        *,
        decoded: bool = False,
    ) -> tuple[dict[str, Any], Warnings]:
        served = self.registry.storage_type(*rt.storage_key) or rt
        try:
            result = admission.admit(
                operation=operation,
                api_version=rt.api_version,
                kind=rt.kind,
                obj=obj,
                old=old,
                schema=rt.schema if rt.schema is not None else served.schema,
                field_validation=opts.field_validation,
                subresource=subresource,
                decoded=decoded,
            )
        except admission.AdmissionError as exc:
            causes = [
                {"reason": c.reason, "message": c.message, "field": c.field} for c in exc.causes
            ]
            # 422 for an invalid object; 400 for a body that cannot be decoded as the kind at all.
            raise errors.StatusError(
                exc.code,
                exc.reason,
                exc.message,
                name=exc.name,
                group=rt.group,
                kind=rt.kind,
                causes=causes,
            ) from exc
        admitted = result.obj
        # Admission may default and prune, never touch what the server owns.
        owned = (*_SYSTEM_FIELDS, "name", "namespace", "resourceVersion")
        server_meta = {k: v for k, v in obj["metadata"].items() if k in owned}
        admitted["metadata"] = {**(admitted.get("metadata") or {}), **server_meta}
        admitted["apiVersion"], admitted["kind"] = obj["apiVersion"], obj["kind"]
        return admitted, list(result.warnings)

    def _admit_priority(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """The Priority admission plugin (`kubesim.admission.priority`) on pods and
        PriorityClasses."""
        is_pod = builtins.is_type(rt, builtins.PODS)
        if not is_pod and not builtins.is_type(rt, builtins.PRIORITY_CLASSES):
            return
        classes = self.store.objects(builtins.PRIORITY_CLASSES.storage_key, None)
        spec = obj.get("spec")
        try:
            if not is_pod:
                priority.check_global_default(obj, classes, create=old is None)
            elif not isinstance(spec, dict):
                return
            elif old is None:
                priority.admit_pod_create(spec, {pc["metadata"]["name"]: pc for pc in classes})
            else:
                priority.admit_pod_update(spec, old.get("spec") or {})
        except priority.PriorityRefusal as refusal:
            name = str(obj["metadata"].get("name") or "")
            raise errors.forbidden(rt.plural, rt.group, name, str(refusal)) from refusal

    def _write_update(
        self,
        rt: ResourceType,
        current: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        opts: WriteOptions,
        *,
        decoded: bool = False,
    ) -> Written:
        cur_meta = current["metadata"]
        meta = new["metadata"]
        name = cur_meta["name"]
        if meta.get("name") and meta["name"] != name:
            raise errors.name_mismatch(meta["name"], name)
        self._writable_namespace(rt, cur_meta.get("namespace"), meta, creating=False)
        if meta.get("uid") and meta["uid"] != cur_meta.get("uid"):
            raise errors.field_invalid(
                rt.kind, rt.group, name, "metadata.uid", "field is immutable"
            )
        for key in (*_SYSTEM_FIELDS, "name", "resourceVersion"):
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        merged = builtins.prepare_update(rt, dict(current), new, subresource)
        if cur_meta.get("deletionTimestamp"):
            added = set(_meta(merged).get("finalizers") or []) - set(
                cur_meta.get("finalizers") or []
            )
            if added:
                why = (
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found {added}"
                )
                raise errors.field_invalid(
                    rt.kind,
                    rt.group,
                    name,
                    "metadata.finalizers",
                    why,
                    reason="FieldValueForbidden",
                )
        if subresource is None:
            self._admit_priority(rt, merged, current)
        merged, warnings = self._admit(
            "UPDATE", rt, merged, self._relabel(rt, current), opts, subresource, decoded=decoded
        )
        if builtins.spec_changed(rt, current, merged):
            merged["metadata"]["generation"] = int(cur_meta.get("generation") or 0) + 1
        if merged == current:
            return Written(self._relabel(rt, current), warnings)
        if opts.dry_run:
            return Written(self._relabel(rt, merged), warnings)
        if builtins.deletion_complete(rt, merged):
            # The last finalizer is gone from an object being deleted: the update completes the
            # delete.
            self._remove(rt, merged, old=current)
            return Written(self._relabel(rt, merged), warnings, deleted=True)
        self._commit("MODIFIED", rt, merged, current)
        if builtins.is_type(rt, builtins.CRDS):
            self.registry.register_crd(merged)
        return Written(self._relabel(rt, merged), warnings)

    def _apply_create(
        self, rt: ResourceType, namespace: str | None, name: str, body: bytes, opts: WriteOptions
    ) -> Written:
        """Server-side apply of a missing object creates it (upsert)."""
        try:
            obj = yaml.safe_load(body.decode() or "{}")
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from exc
        if not isinstance(obj, dict):
            raise errors.bad_request("the apply body must be an object")
        meta = _meta(obj)
        if meta.get("name") and meta["name"] != name:
            raise errors.name_mismatch(meta["name"], name)
        meta["name"] = name
        return self.create(rt, namespace, obj, opts=opts)

    def _scale_of(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.scale is None:
            raise errors.not_found(f"{rt.plural}/scale", rt.group, obj["metadata"]["name"])
        return rt.scale.to_scale(obj)

    def _update_scale(
        self, rt: ResourceType, current: dict[str, Any], scale: dict[str, Any], opts: WriteOptions
    ) -> Written:
        if rt.scale is None:
            raise errors.not_found(f"{rt.plural}/scale", rt.group, current["metadata"]["name"])
        name = current["metadata"]["name"]
        meta = scale.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.name_mismatch(meta["name"], name)
        if (
            meta.get("resourceVersion")
            and meta["resourceVersion"] != current["metadata"]["resourceVersion"]
        ):
            raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            why = f"Invalid value: {replicas!r}: must be greater than or equal to 0"
            raise errors.field_invalid("Scale", "autoscaling", name, "spec.replicas", why)
        new = clone(current)
        set_path(new, rt.scale.spec_replicas_path, replicas)
        written = self._write_update(rt, current, new, None, opts)
        return Written(self._scale_of(rt, written.object), written.warnings)

    def _remove(
        self, rt: ResourceType, obj: dict[str, Any], *, old: dict[str, Any] | None = None
    ) -> None:
        if builtins.is_type(rt, builtins.CRDS):
            # As the CRD's cleanup finalizer does: its objects go first, then the CRD and its
            # endpoints.
            for served in self.registry.crd_types(obj["metadata"]["name"])[:1]:
                for instance in self.store.objects(served.storage_key, None):
                    self._commit("DELETED", served, clone(instance), instance)
        self._commit("DELETED", rt, clone(obj), old if old is not None else obj)
        if builtins.is_type(rt, builtins.CRDS):
            self.registry.unregister_crd(obj["metadata"]["name"])

    def _commit(
        self,
        change_type: Literal["ADDED", "MODIFIED", "DELETED"],
        rt: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        change = self.store.commit(change_type, rt.storage_key, obj, old)
        if self._listeners:
            self._undelivered.append(change)
            self._dispatch(rt)

    def _dispatch(self, rt: ResourceType) -> None:
        # A listener that writes re-enters here; the outer loop delivers its changes in commit
        # order.
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self._undelivered:
                change = self._undelivered.popleft()
                storage = self._storage_type(change.key, rt)
                new = self._relabel(storage, change.object)
                old = self._relabel(storage, change.old) if change.old is not None else None
                for listener in list(self._listeners):
                    try:
                        listener(change.type, storage, new, old)
                    except Exception:
                        log.exception("kubesim listener %r failed on %s", listener, change.type)
        finally:
            self._dispatching = False
