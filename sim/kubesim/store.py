"""Object storage of the simulated cluster: objects, the global resourceVersion, event history,
watchers.

The role etcd plus the apiserver's watch cache play. Stored objects are never mutated after a commit
(callers copy before changing anything), so the history and list snapshots share them safely.
Watchers get committed changes through bounded per-watcher buffers: a watcher that falls too far
behind is closed (its client reconnects, as with a real apiserver) instead of blocking writers.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from kubesim import errors
from kubesim.registry import ResourceType, StorageKey

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
ObjectKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""

CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start "
    "a new "
    "list without the continue parameter."
)


@dataclass(frozen=True)
class Change:
    """One committed change, as kept in the history and sent to watchers."""

    rv: int
    type: ChangeType
    key: StorageKey
    namespace: str
    object: dict[str, Any]
    old: dict[str, Any] | None


def clone(value: Any) -> Any:
    """A deep copy of JSON-shaped data (several times faster than `copy.deepcopy`)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


class Watcher:
    """A registered watch: a bounded buffer of changes for one resource (and maybe one
    namespace)."""

    def __init__(self, key: StorageKey, namespace: str | None, limit: int) -> None:
        self.key = key
        self.namespace = namespace
        self.limit = limit
        self.closed = False
        self.overflowed = False
        self._pending: deque[Change] = deque()
        self._wake = asyncio.Event()

    def offer(self, change: Change) -> None:
        if self.closed:
            return
        if len(self._pending) >= self.limit:
            self.overflowed = True
            self.close()
            return
        self._pending.append(change)
        self._wake.set()

    def close(self) -> None:
        """Ends the watch now: undelivered changes are dropped, as a broken connection drops
        them."""
        self.closed = True
        self._pending.clear()
        self._wake.set()

    async def next(self, wait: float | None) -> Change | None:
        """The next change; None when `wait` seconds passed first or the watcher is closed."""
        while not self._pending:
            if self.closed:
                return None
            self._wake.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                return None
        return self._pending.popleft()

    def drain(self) -> list[Change]:
        """Every change buffered now (without waiting)."""
        changes = list(self._pending)
        self._pending.clear()
        return changes


@dataclass(frozen=True)
class Snapshot:
    rv: int
    items: tuple[dict[str, Any], ...]


class Store:
    """All stored objects, the resourceVersion counter, the bounded change history and the
    watchers."""

    def __init__(
        self, *, history_size: int, watcher_buffer: int = 10_000, snapshots: int = 64
    ) -> None:
        self._objects: dict[StorageKey, dict[ObjectKey, dict[str, Any]]] = {}
        self.resource_version = 0
        self._history: deque[Change] = deque(maxlen=max(1, history_size))
        self.floor = 0
        """Changes with rv <= floor may be gone from the history: watching from there answers
        410."""
        self._watchers: dict[StorageKey, set[Watcher]] = {}
        self._watcher_buffer = watcher_buffer
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._snapshot_limit = snapshots
        self._snapshot_ids = itertools.count(1)

    # --- reads ---------------------------------------------------------------------------------
    def get(self, key: StorageKey, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(key, {}).get((namespace, name))

    def objects(self, key: StorageKey, namespace: str | None) -> list[dict[str, Any]]:
        """Stored objects of a resource (one namespace, or all when None), ordered by
        namespace/name."""
        bucket = self._objects.get(key, {})
        keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
        return [bucket[k] for k in keys]

    def every_object(self) -> list[dict[str, Any]]:
        """Every stored object of every resource (unordered): for scans over a whole cluster."""
        return [obj for bucket in self._objects.values() for obj in bucket.values()]

    def count(self, key: StorageKey | None = None) -> int:
        if key is not None:
            return len(self._objects.get(key, {}))
        return sum(len(b) for b in self._objects.values())

    # --- writes --------------------------------------------------------------------------------
    def commit(
        self,
        change_type: ChangeType,
        key: StorageKey,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> Change:
        """Stores (or removes, for DELETED) `obj` with the next resourceVersion; `obj` becomes
        immutable."""
        self.resource_version += 1
        rv = self.resource_version
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(rv)
        namespace = str(meta.get("namespace") or "")
        okey = (namespace, str(meta.get("name", "")))
        bucket = self._objects.setdefault(key, {})
        if change_type == "DELETED":
            bucket.pop(okey, None)
        else:
            bucket[okey] = obj
        change = Change(rv=rv, type=change_type, key=key, namespace=namespace, object=obj, old=old)
        if len(self._history) == self._history.maxlen:
            self.floor = self._history[0].rv
        self._history.append(change)
        for watcher in list(self._watchers.get(key, ())):
            if watcher.namespace is None or watcher.namespace == namespace:
                watcher.offer(change)
        return change

    # --- history and watchers --------------------------------------------------------------------
    def changes_since(self, key: StorageKey, namespace: str | None, rv: int) -> list[Change] | None:
        """Changes after `rv` for one resource, oldest first; None when `rv` is older than the
        history."""
        if rv < self.floor:
            return None
        return [
            c
            for c in self._history
            if c.rv > rv and c.key == key and (namespace is None or c.namespace == namespace)
        ]

    def watch(self, key: StorageKey, namespace: str | None) -> Watcher:
        watcher = Watcher(key, namespace, self._watcher_buffer)
        self._watchers.setdefault(key, set()).add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers.get(watcher.key, set()).discard(watcher)

    def watchers(self) -> list[Watcher]:
        return [w for ws in self._watchers.values() for w in ws]

    def close_watchers(self, predicate: Callable[[Watcher], bool] | None = None) -> int:
        """Ends open watches (all, or those `predicate` picks); returns how many were closed."""
        closed = 0
        for watcher in self.watchers():
            if predicate is None or predicate(watcher):
                self.unwatch(watcher)
                closed += 1
        return closed

    def compact(self, rv: int | None = None) -> int:
        """Forgets the history up to `rv` (default: all of it), like etcd compaction; returns the
        floor."""
        target = self.resource_version if rv is None else min(rv, self.resource_version)
        while self._history and self._history[0].rv <= target:
            self._history.popleft()
        self.floor = max(self.floor, target)
        return self.floor

    # --- list snapshots (limit/continue) ---------------------------------------------------------
    def save_snapshot(self, items: list[dict[str, Any]]) -> int:
        snap_id = next(self._snapshot_ids)
        self._snapshots[snap_id] = Snapshot(rv=self.resource_version, items=tuple(items))
        while len(self._snapshots) > self._snapshot_limit:
            self._snapshots.popitem(last=False)
        return snap_id

    def load_snapshot(self, token: str) -> tuple[Snapshot, int, int]:
        """(snapshot, offset, snapshot id) for a continue token; 410 Expired when it is gone or
        compacted."""
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            snap_id, offset, rv = int(data["id"]), int(data["offset"]), int(data["rv"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise errors.bad_request(f"continue key is not valid: {exc}") from exc
        snapshot = self._snapshots.get(snap_id)
        if snapshot is None or rv < self.floor or snapshot.rv != rv:
            raise errors.expired(CONTINUE_EXPIRED)
        return snapshot, offset, snap_id

    @staticmethod
    def continue_token(snap_id: int, offset: int, rv: int) -> str:
        raw = json.dumps({"id": snap_id, "offset": offset, "rv": rv}).encode()
        return base64.urlsafe_b64encode(raw).decode()


# --- watch streams --------------------------------------------------------------------------------
EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: dict[str, Any]


WatchBatch = list[WatchEvent]
"""Every event of one watch available at one moment (`watch_batches`)."""


def transition(
    change: Change,
    match: Callable[[dict[str, Any]], bool],
    present: Callable[[dict[str, Any]], dict[str, Any]],
) -> WatchEvent | None:
    """How a filtered watch sees a change, as the apiserver's watch cache decides it.

    An object that starts matching the selectors arrives as ADDED; one that stops matching leaves as
    DELETED carrying its previous content with the new resourceVersion.
    """
    new_ok = match(change.object)
    if change.type != "MODIFIED":
        return WatchEvent(change.type, present(change.object)) if new_ok else None
    old_ok = change.old is not None and match(change.old)
    if new_ok:
        return WatchEvent("MODIFIED" if old_ok else "ADDED", present(change.object))
    if old_ok and change.old is not None:
        gone = present(change.old)
        gone = {**gone, "metadata": {**gone["metadata"], "resourceVersion": str(change.rv)}}
        return WatchEvent("DELETED", gone)
    return None


def watch_batches(
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    *,
    resource_version: str,
    match: Callable[[dict[str, Any]], bool],
    allow_bookmarks: bool,
    send_initial_events: bool,
    bookmark_seconds: float,
    present: Callable[[dict[str, Any]], dict[str, Any]],
) -> AsyncIterator[WatchBatch]:
    """The events of one watch request, in batches: each holds every event available at that moment,
    so a server writes a burst of changes at once. Checks its arguments now (400) and streams
    lazily."""
    from_now = resource_version in ("", "0")
    start = 0
    if not from_now:
        try:
            start = int(resource_version)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None

    def bookmark(rv: int, *, initial_end: bool = False) -> WatchEvent:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return WatchEvent(
            "BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
        )

    async def events() -> AsyncIterator[WatchBatch]:
        # Registration and the initial events happen in one synchronous step, so no change is lost.
        watcher = store.watch(rt.storage_key, namespace)
        try:
            initial: list[WatchEvent] = []
            if from_now or send_initial_events:
                for obj in store.objects(rt.storage_key, namespace):
                    if match(obj):
                        initial.append(WatchEvent("ADDED", present(obj)))
                if send_initial_events and allow_bookmarks:
                    initial.append(bookmark(store.resource_version, initial_end=True))
            else:
                changes = store.changes_since(rt.storage_key, namespace, start)
                if changes is None:
                    expired = errors.expired(f"too old resource version: {start} ({store.floor})")
                    yield [WatchEvent("ERROR", expired.status())]
                    return
                replayed = (transition(c, match, present) for c in changes)
                initial = [e for e in replayed if e is not None]
            if initial:
                yield initial
            loop = asyncio.get_running_loop()
            next_bookmark = loop.time() + bookmark_seconds
            while True:
                wait = max(0.0, next_bookmark - loop.time()) if allow_bookmarks else None
                change = await watcher.next(wait)
                if change is None:
                    if watcher.closed:
                        return
                    # The buffer is empty, so every change up to the current version was delivered.
                    yield [bookmark(store.resource_version)]
                    next_bookmark = loop.time() + bookmark_seconds
                    continue
                seen = (transition(c, match, present) for c in (change, *watcher.drain()))
                if batch := [e for e in seen if e is not None]:
                    yield batch
        finally:
            store.unwatch(watcher)

    return events()


async def flatten(batches: AsyncIterator[WatchBatch]) -> AsyncIterator[WatchEvent]:
    """One event at a time from `watch_batches`; closing this closes the batches (and the watch)."""
    try:
        async for batch in batches:
            for event in batch:
                yield event
    finally:
        await batches.aclose()  # type: ignore[attr-defined]
