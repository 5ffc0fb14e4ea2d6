"""Store (client-go's `Indexer`): the informer's local copy of one resource, by "namespace/name".

Objects are the raw JSON dicts the API server sent. READ-ONLY RULE: whatever `get`, `list` or
`by_index` returns is shared with the store and every other reader, exactly like client-go's cache;
never mutate it. Build a new dict (`copy.deepcopy` the parts you change) for anything you send back.
Never copying in or out is what keeps memory and CPU proportional to what is owned.

Indexes map an index value to the keys of the objects that produce it. Two are built in: by
namespace and by controller-owner uid (the `ownerReferences` entry with `controller: true`), which
is how a reconcile finds a job's children without a LIST. The store runs on one event loop and has
no locks; it does no I/O.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mpi_operator.objects import KubeObject, controller_uid, name_of, namespace_of

IndexFunc = Callable[[KubeObject], list[str]]

NAMESPACE_INDEX = "namespace"
CONTROLLER_UID_INDEX = "controller-uid"


def object_key(obj: Mapping[str, Any]) -> str:
    """client-go's `MetaNamespaceKeyFunc`: "namespace/name", or "name" for cluster-scoped
    objects."""
    namespace = namespace_of(obj)
    return f"{namespace}/{name_of(obj)}" if namespace else name_of(obj)


def split_key(key: str) -> tuple[str | None, str]:
    """ "ns/name" -> ("ns", "name"); "name" -> (None, "name")."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)


def index_by_namespace(obj: KubeObject) -> list[str]:
    namespace = namespace_of(obj)
    return [namespace] if namespace else []


def index_by_controller_uid(obj: KubeObject) -> list[str]:
    uid = controller_uid(obj)
    return [uid] if uid else []


DEFAULT_INDEXERS: Mapping[str, IndexFunc] = {
    NAMESPACE_INDEX: index_by_namespace,
    CONTROLLER_UID_INDEX: index_by_controller_uid,
}


class Store:
    """A thread-free Indexer; see the module docstring for the read-only rule."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._indexers: dict[str, IndexFunc] = dict(
            DEFAULT_INDEXERS if indexers is None else indexers
        )
        self._items: dict[str, KubeObject] = {}
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._synced = False
        self.resource_version = ""
        """The resourceVersion of the last full `replace` (the list the store was synced from)."""

    # --- reads ---------------------------------------------------------------------------------
    def get(self, key: str) -> KubeObject | None:
        """The object stored under "ns/name" (shared: do not mutate)."""
        return self._items.get(key)

    def get_object(self, obj: Mapping[str, Any]) -> KubeObject | None:
        return self._items.get(object_key(obj))

    def list(self) -> builtins.list[KubeObject]:
        return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        return list(self._items)

    def by_index(self, index_name: str, value: str) -> builtins.list[KubeObject]:
        """Objects whose index function yields `value`, e.g. `by_index(CONTROLLER_UID_INDEX,
        job_uid)`."""
        keys = self._index(index_name).get(value, ())
        return [self._items[key] for key in keys]

    def controlled_by(self, uid: str) -> builtins.list[KubeObject]:
        """The objects whose controller owner reference points at `uid` (a job's children)."""
        return self.by_index(CONTROLLER_UID_INDEX, uid)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        return list(self._index(index_name).get(value, ()))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def has_synced(self) -> bool:
        """True once a full list has been stored (`replace` called at least once)."""
        return self._synced

    # --- writes (the reflector's) --------------------------------------------------------------
    def upsert(self, obj: KubeObject) -> KubeObject | None:
        """Stores `obj` (added or updated) under its key; returns what it replaced."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._reindex(key, obj)
        return old

    def delete(self, key: str) -> KubeObject | None:
        """Removes the object under `key`; returns it (None if it was not there)."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(
        self, items: Iterable[KubeObject], resource_version: str, *, namespace: str | None = None
    ) -> dict[str, KubeObject]:
        """Swaps in a fresh list; returns the previous contents ("ns/name" -> object) of the scope.

        With `namespace`, only that namespace's objects are replaced: a reflector per namespace
        owns its slice of a shared store.
        """
        fresh = {object_key(obj): obj for obj in items}
        if namespace is None:
            previous = self._items
            self._items = fresh
            self._indices = {name: {} for name in self._indexers}
            for key, obj in fresh.items():
                self._reindex(key, obj)
        else:
            previous = {
                key: self._items[key] for key in self.index_keys(NAMESPACE_INDEX, namespace)
            }
            for key in previous:
                self.delete(key)
            for obj in fresh.values():
                self.upsert(obj)
        self.resource_version = resource_version
        self._synced = True
        return previous

    # --- index maintenance ---------------------------------------------------------------------
    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"no index named {index_name!r}") from None

    def _reindex(self, key: str, obj: KubeObject) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: KubeObject) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
