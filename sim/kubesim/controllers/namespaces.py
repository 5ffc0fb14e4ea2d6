"""The namespace controller: empties a Terminating namespace, then releases its `kubernetes`
finalizer.

Every namespaced resource type the registry serves is listed and each object deleted (Background,
pods with their grace period, so the kubelet stops them as usual). While content remains the
namespace carries the `NamespaceContentRemaining` condition; once nothing is left the `kubernetes`
finalizer is removed from `spec.finalizers` through the `finalize` subresource and the API server
removes the namespace.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim.clock import Clock
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none, resource_type
from kubesim.errors import StatusError
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

FINALIZER = "kubernetes"


class NamespaceController:
    name = "namespace-controller"

    def __init__(self, cluster: Cluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._ns_rt = resource_type(cluster, "v1", "Namespace")
        self._queue: WorkQueue[str] = WorkQueue(clock)
        self._terminating: set[str] = set()

    async def run(self) -> None:
        for ns in self._cluster.list(self._ns_rt, None)["items"]:
            self.on_change("ADDED", self._ns_rt, ns, None)
        await process(self.name, self._queue, self._sync)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        if rt.group == self._ns_rt.group and rt.plural == self._ns_rt.plural:
            name = str(meta.get("name", ""))
            if event == "DELETED":
                self._terminating.discard(name)
            elif meta.get("deletionTimestamp") is not None:
                self._terminating.add(name)
                self._queue.add(name)
        elif event == "DELETED" and meta.get("namespace") in self._terminating:
            self._queue.add(str(meta["namespace"]))

    def _types(self) -> list[ResourceType]:
        seen: dict[tuple[str, str], ResourceType] = {}
        for rt in self._cluster.registry.all():
            if rt.namespaced:
                seen.setdefault((rt.group, rt.plural), rt)
        return list(seen.values())

    def _sync(self, name: str) -> None:
        ns = get_or_none(self._cluster, self._ns_rt, None, name)
        if ns is None or ns["metadata"].get("deletionTimestamp") is None:
            return
        if FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or []):
            return
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for rt in self._types():
            for obj in self._cluster.list(rt, name)["items"]:
                meta = obj["metadata"]
                if meta.get("deletionTimestamp") is None:
                    self._delete(rt, name, meta["name"])
                left = get_or_none(self._cluster, rt, name, meta["name"])
                if left is None:
                    continue
                resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                remaining[resource] = remaining.get(resource, 0) + 1
                for finalizer in left["metadata"].get("finalizers") or []:
                    finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        self._set_conditions(ns, remaining, finalizers)
        if remaining:
            return
        current = get_or_none(self._cluster, self._ns_rt, None, name)
        if current is not None:
            spec = dict(current.get("spec") or {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
            self._cluster.update(
                self._ns_rt, None, name, {**current, "spec": spec}, subresource="finalize"
            )

    def _delete(self, rt: ResourceType, namespace: str, name: str) -> None:
        try:
            self._cluster.delete(
                rt, namespace, name, options=DeleteOptions(propagation_policy="Background")
            )
        except StatusError as err:
            if err.code != 404:
                raise

    def _set_conditions(
        self, ns: dict[str, Any], remaining: dict[str, int], finalizers: dict[str, int]
    ) -> None:
        """The deletion conditions the namespace controller reports while it works
        (namespace_deleter.go)."""
        content = ", ".join(f"{r} has {n} resource instances" for r, n in sorted(remaining.items()))
        held = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
        wanted = [
            (
                "NamespaceDeletionDiscoveryFailure",
                False,
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                False,
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            (
                "NamespaceDeletionContentFailure",
                False,
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            (
                "NamespaceContentRemaining",
                bool(remaining),
                "SomeResourcesRemain" if remaining else "ContentRemoved",
                f"Some resources are remaining: {content}"
                if remaining
                else "All content successfully removed",
            ),
            (
                "NamespaceFinalizersRemaining",
                bool(finalizers),
                "SomeFinalizersRemain" if finalizers else "ContentHasNoFinalizers",
                f"Some content in the namespace has finalizers remaining: {held}"
                if finalizers
                else "All content-preserving finalizers finished",
            ),
        ]
        status = dict(ns.get("status") or {})
        previous = {c.get("type"): c for c in status.get("conditions") or []}
        stamp = self._clock.timestamp()
        conditions = []
        for ctype, value, reason, message in wanted:
            text = "True" if value else "False"
            prev = previous.get(ctype) or {}
            conditions.append(
                {
                    "type": ctype,
                    "status": text,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": prev.get("lastTransitionTime")
                    if prev.get("status") == text
                    else stamp,
                }
            )
        if conditions != status.get("conditions"):
            status["conditions"] = conditions
            self._cluster.update(
                self._ns_rt,
                None,
                ns["metadata"]["name"],
                {**ns, "status": status},
                subresource="status",
            )
