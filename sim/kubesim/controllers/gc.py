"""The garbage collector: ownerReferences cascades, `orphan` and `foregroundDeletion` finalizers.

As kube-controller-manager's: an owner -> dependents graph fed by the cluster listener, owners
verified by a live read compared by uid. Dependents whose owners are all gone are deleted,
references to gone owners are removed, `orphan` strips references before its finalizer goes,
`foregroundDeletion` deletes dependents and goes once none with `blockOwnerDeletion` is left. Owner
kinds never seen count as present (the real GC retries them); a kind whose CRD was deleted counts as
gone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from kubesim.clock import Clock
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"

# (group, plural, namespace or "", name)
ObjectKey = tuple[str, str, str, str]
# ("dependent" | "owner", object key)
Item = tuple[str, ObjectKey]


def _key(rt: ResourceType, obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return rt.group, rt.plural, str(meta.get("namespace") or ""), str(meta.get("name", ""))


_NO_OWNERS: frozenset[str] = frozenset()


def _owner_uids(obj: dict[str, Any] | None) -> frozenset[str]:
    refs = None if obj is None else (obj.get("metadata") or {}).get("ownerReferences")
    if not refs:
        return _NO_OWNERS
    return frozenset(str(r.get("uid", "")) for r in refs)


def _finalizers(obj: dict[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


class GarbageCollector:
    name = "garbage-collector"

    def __init__(self, cluster: Cluster, clock: Clock) -> None:
        self._cluster = cluster
        self._queue: WorkQueue[Item] = WorkQueue(clock)
        self._types: dict[tuple[str, str], ResourceType] = {}
        # Kinds seen, by (group, kind): an owner whose CRD is gone still resolves, and reads as
        # absent.
        self._kinds: dict[tuple[str, str], ResourceType] = {}
        self._dependents: dict[str, set[ObjectKey]] = {}
        self._owners_of: dict[ObjectKey, frozenset[str]] = {}
        self._by_uid: dict[str, ObjectKey] = {}

    async def run(self) -> None:
        for rt in self._cluster.registry.all():
            for obj in self._cluster.list(rt, None)["items"]:
                self.on_change("ADDED", rt, obj, None)
        await process(self.name, self._queue, self._sync)

    def dependents(self, owner_uid: str) -> set[ObjectKey]:
        """Objects whose ownerReferences name `owner_uid` (the graph the GC keeps)."""
        return set(self._dependents.get(owner_uid, ()))

    # --- graph maintenance ------------------------------------------------------------------------
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        key = _key(rt, obj)
        self._types[(rt.group, rt.plural)] = rt
        self._kinds[(rt.group, rt.kind)] = rt
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        before = self._owners_of.get(key, _NO_OWNERS)
        after = _NO_OWNERS if event == "DELETED" else _owner_uids(obj)
        if before != after:  # most changes (status writes, Events) leave the owners alone
            for owner in before - after:
                deps = self._dependents.get(owner)
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[owner]
                # A foreground-deleting owner may be waiting for exactly this dependent.
                if owner in self._by_uid:
                    self._queue.add(("owner", self._by_uid[owner]))
            for owner in after - before:
                self._dependents.setdefault(owner, set()).add(key)
            if after:
                self._owners_of[key] = after
            else:
                self._owners_of.pop(key, None)

        if event == "DELETED":
            if self._by_uid.get(uid) == key:
                del self._by_uid[uid]
            for dep in self._dependents.get(uid, ()):
                self._queue.add(("dependent", dep))
            return
        self._by_uid[uid] = key
        refs_changed = self._refs_changed(old, obj)
        if after and (event == "ADDED" or refs_changed):
            self._queue.add(("dependent", key))
        if meta.get("deletionTimestamp") is not None and {ORPHAN, FOREGROUND} & set(
            _finalizers(obj)
        ):
            self._queue.add(("owner", key))
        if refs_changed:
            # blockOwnerDeletion may have been dropped: a foreground owner may be free to go.
            for owner in after:
                if owner in self._by_uid:
                    self._queue.add(("owner", self._by_uid[owner]))

    @staticmethod
    def _refs_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
        def refs(obj: dict[str, Any] | None) -> list[Any]:
            return list(((obj or {}).get("metadata") or {}).get("ownerReferences") or [])

        return old is not None and refs(old) != refs(new)

    # --- reconciliation
    # ---------------------------------------------------------------------------- Objects are read
    # without copies (`copy=False`): every write below builds a new body.
    def _sync(self, item: Item) -> None:
        kind, key = item
        rt = self._types.get((key[0], key[1]))
        if rt is None:
            return
        obj = get_or_none(self._cluster, rt, key[2] or None, key[3], copy=False)
        if obj is None:
            return
        if kind == "dependent":
            self._sync_dependent(rt, obj)
        else:
            self._sync_owner(rt, obj)

    def _classify(
        self, rt: ResourceType, obj: dict[str, Any]
    ) -> tuple[list[Any], list[Any], list[Any]]:
        solid: list[Any] = []
        dangling: list[Any] = []
        waiting: list[Any] = []
        ns = (obj.get("metadata") or {}).get("namespace")
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            ort = self._owner_type(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if ort is None or (ort.namespaced and not ns):
                solid.append(ref)
                continue
            owner = get_or_none(
                self._cluster,
                ort,
                ns if ort.namespaced else None,
                str(ref.get("name", "")),
                copy=False,
            )
            if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
                dangling.append(ref)
            elif owner["metadata"].get(
                "deletionTimestamp"
            ) is not None and FOREGROUND in _finalizers(owner):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    def _owner_type(self, api_version: str, kind: str) -> ResourceType | None:
        found = self._cluster.registry.by_kind(api_version, kind)
        if found is not None:
            return found
        group = api_version.rpartition("/")[0]
        return self._kinds.get((group, kind))

    def _sync_dependent(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        solid, dangling, waiting = self._classify(rt, obj)
        if solid:
            if dangling or waiting:
                gone = {r.get("uid") for r in dangling + waiting}
                self._set_owner_refs(
                    rt,
                    obj,
                    [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in gone],
                )
            return
        if not dangling and not waiting:
            return
        if meta.get("deletionTimestamp") is not None:
            return
        has_dependents = bool(self._dependents.get(str(meta.get("uid", ""))))
        policy: Literal["Foreground", "Background"] = (
            "Foreground" if waiting and has_dependents else "Background"
        )
        log.debug(
            "gc: deleting %s %s/%s (%s)", rt.kind, meta.get("namespace"), meta.get("name"), policy
        )
        self._cluster.delete(
            rt,
            meta.get("namespace"),
            meta["name"],
            options=DeleteOptions(
                propagation_policy=policy, preconditions={"uid": str(meta.get("uid", ""))}
            ),
        )

    def _dependent_objects(self, uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
        out = []
        for key in list(self._dependents.get(uid, ())):
            rt = self._types.get((key[0], key[1]))
            if rt is None:
                continue
            dep = get_or_none(self._cluster, rt, key[2] or None, key[3], copy=False)
            if dep is not None and uid in _owner_uids(dep):
                out.append((rt, dep))
        return out

    def _sync_owner(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") is None:
            return
        uid = str(meta.get("uid", ""))
        finalizers = _finalizers(obj)
        if ORPHAN in finalizers:
            for drt, dep in self._dependent_objects(uid):
                refs = dep["metadata"].get("ownerReferences") or []
                self._set_owner_refs(drt, dep, [r for r in refs if r.get("uid") != uid])
            self._remove_finalizer(rt, obj, ORPHAN)
        elif FOREGROUND in finalizers:
            for drt, dep in self._dependent_objects(uid):
                self._sync_dependent(drt, dep)
            blocking = [
                dep
                for _, dep in self._dependent_objects(uid)
                if any(
                    r.get("uid") == uid and r.get("blockOwnerDeletion")
                    for r in dep["metadata"].get("ownerReferences") or []
                )
            ]
            if not blocking:
                self._remove_finalizer(rt, obj, FOREGROUND)

    def _set_owner_refs(self, rt: ResourceType, obj: dict[str, Any], refs: list[Any]) -> None:
        meta = dict(obj["metadata"])
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        self._cluster.update(rt, meta.get("namespace"), meta["name"], {**obj, "metadata": meta})

    def _remove_finalizer(self, rt: ResourceType, owner: dict[str, Any], finalizer: str) -> None:
        meta = owner["metadata"]
        # Re-read: the dependents' writes above ran listeners and may have changed the owner.
        current = get_or_none(self._cluster, rt, meta.get("namespace"), meta["name"], copy=False)
        if current is None or current["metadata"].get("uid") != meta.get("uid"):
            return
        cmeta = dict(current["metadata"])
        cmeta["finalizers"] = [f for f in _finalizers(current) if f != finalizer]
        self._cluster.update(
            rt, cmeta.get("namespace"), cmeta["name"], {**current, "metadata": cmeta}
        )
