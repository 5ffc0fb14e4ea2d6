"""Informer: reflector(s) + one indexed `Store` + event handlers (client-go `shared_informer.go`).

Handlers (`on_add`, `on_update`, `on_delete`) are sync callables run on the event loop right after
the store changed, and should only map the object to keys and enqueue them; one that raises is
logged and the next still runs. An update that keeps the resourceVersion is dropped; a deletion only
a relist noticed hands over the last state known (client-go's tombstone). `transform` runs on every
object before it is stored or handed on (`cache.transforms`). `namespaces=()` runs one cluster-wide
reflector, otherwise one per namespace, each relist replacing only its namespace's slice. Objects
handed to handlers are the store's own: read-only (see `cache.store`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from mpi_operator.cache.recovery import RecoveryProber
from mpi_operator.cache.reflector import Backoff, ListerWatcher, Reflector, Transform
from mpi_operator.cache.store import IndexFunc, Store, object_key
from mpi_operator.flowcontrol import Clock
from mpi_operator.objects import KubeObject, resource_version

log = logging.getLogger(__name__)

OnAdd = Callable[[KubeObject], None]
OnUpdate = Callable[[KubeObject, KubeObject], None]
OnDelete = Callable[[KubeObject], None]


@dataclass(frozen=True)
class EventHandler:
    on_add: OnAdd | None = None
    on_update: OnUpdate | None = None
    on_delete: OnDelete | None = None


class Informer:
    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        namespaces: Sequence[str] = (),
        label_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,  # None: by namespace and controller uid
        name: str = "",
        clock: Clock | None = None,  # None for the real clock
        backoff_factory: Callable[[], Backoff] | None = None,  # None: the reflector's default
        min_watch_timeout: int | None = None,
        recovery: RecoveryProber | None = None,  # shared by every informer of one client
        transform: Transform | None = None,  # None: store objects as sent
    ) -> None:
        self.name = name
        self.transform = transform
        self.store = Store(indexers)
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        scopes: Sequence[str | None] = tuple(namespaces) or (None,)
        self._sinks = [_ScopedSink(self, scope) for scope in scopes]
        extra: dict[str, Any] = {}
        if min_watch_timeout is not None:
            extra["min_watch_timeout"] = min_watch_timeout
        self.reflectors = [
            Reflector(
                lister_watcher,
                sink,
                namespace=sink.namespace,
                label_selector=label_selector,
                name=f"{name or 'informer'}[{sink.namespace or '*'}]",
                clock=clock,
                backoff=backoff_factory() if backoff_factory else None,
                recovery=recovery,
                transform=transform,
                **extra,
            )
            for sink in self._sinks
        ]

    def add_event_handler(
        self,
        *,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
    ) -> None:
        """Registers handlers; register before `run()` so that the initial list reaches them."""
        self._handlers.append(EventHandler(on_add, on_update, on_delete))

    @property
    def has_synced(self) -> bool:
        """Every reflector has listed once: the store is a complete (if possibly stale) picture."""
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    async def run(self) -> NoReturn:
        """Runs every reflector until cancelled."""
        async with asyncio.TaskGroup() as group:
            for reflector in self.reflectors:
                group.create_task(reflector.run(), name=reflector.name)
        raise AssertionError("reflectors never return")  # pragma: no cover

    # --- dispatch (called by the sinks) --------------------------------------------------------
    def _notify_synced(self) -> None:
        if all(sink.synced for sink in self._sinks):
            self._synced.set()

    def _added(self, obj: KubeObject) -> None:
        for handler in self._handlers:
            if handler.on_add is not None:
                self._call(handler.on_add, obj)

    def _changed(self, old: KubeObject | None, new: KubeObject) -> None:
        if old is None:
            self._added(new)
            return
        if resource_version(old) == resource_version(new):
            return
        for handler in self._handlers:
            if handler.on_update is not None:
                self._call(handler.on_update, old, new)

    def _deleted(self, obj: KubeObject) -> None:
        for handler in self._handlers:
            if handler.on_delete is not None:
                self._call(handler.on_delete, obj)

    def _call(self, handler: Callable[..., None], *args: KubeObject) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("%s: event handler %r failed", self.name or "informer", handler)


class _ScopedSink:
    """The `ReflectorStore` one reflector writes to: the shared store plus handler dispatch."""

    def __init__(self, informer: Informer, namespace: str | None) -> None:
        self.informer = informer
        self.namespace = namespace
        self.synced = False

    def replace(self, items: list[KubeObject], resource_version: str) -> None:
        store = self.informer.store
        previous = store.replace(items, resource_version, namespace=self.namespace)
        for obj in items:
            self.informer._changed(previous.get(object_key(obj)), obj)
        fresh = {object_key(obj) for obj in items}
        for key, old in previous.items():
            if key not in fresh:
                self.informer._deleted(old)
        self.synced = True
        self.informer._notify_synced()

    def add(self, obj: KubeObject) -> None:
        self.informer._changed(self.informer.store.upsert(obj), obj)

    def update(self, obj: KubeObject) -> None:
        self.informer._changed(self.informer.store.upsert(obj), obj)

    def delete(self, obj: KubeObject) -> None:
        if self.informer.store.delete(object_key(obj)) is not None:
            self.informer._deleted(obj)
