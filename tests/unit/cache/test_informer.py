"""Informer = reflector + store + handlers, against an in-memory ListerWatcher (the protocol's test
double).

`MemoryApi` is not a Kubernetes mock: it implements only the reflector's `ListerWatcher` protocol
(list with a resourceVersion, watch with history replay, compaction -> 410, dropped streams), so the
generic cache machinery can be tested without HTTP. The same behaviours are tested over real HTTP
against kubesim in tests/integration/cache/test_reflector.py.

Reflectors run on a `FakeClock`: the backoff test steps it deadline by deadline; elsewhere it flows
(`FakeClock.flowing`), so a backoff that a dropped stream causes passes without any real waiting.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any, Literal

import pytest

from kubesim.testing import eventually
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.reflector import Backoff, Reflector, Transform
from mpi_operator.cache.store import object_key
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors

Obj = dict[str, Any]


class MemoryApi:
    """An in-memory ListerWatcher: one global resourceVersion counter and a compactable history."""

    def __init__(self, *, gone_as: Literal["http", "event"] = "event") -> None:
        self.objects: dict[str, Obj] = {}
        self.rv = 0
        self.history: list[tuple[int, str, Obj]] = []
        self.floor = 0
        self.gone_as = gone_as
        self.list_failures = 0
        self.list_calls: list[tuple[str | None, str | None]] = []
        self.watch_calls: list[tuple[str | None, str | None, str]] = []
        self._watchers: list[
            tuple[str | None, str | None, asyncio.Queue[tuple[str, Obj] | None]]
        ] = []
        self._open = asyncio.Event()
        self._open.set()

    # --- server-side changes -------------------------------------------------------------------
    def _commit(self, kind: str, o: Obj) -> None:
        self.rv += 1
        o = copy.deepcopy(o)
        o["metadata"]["resourceVersion"] = str(self.rv)
        if kind == "DELETED":
            self.objects.pop(object_key(o), None)
        else:
            self.objects[object_key(o)] = o
        self.history.append((self.rv, kind, o))
        for namespace, selector, queue in self._watchers:
            if _matches(o, namespace, selector):
                queue.put_nowait((kind, o))

    def create(self, name: str, namespace: str = "ns", **labels: str) -> None:
        self._commit(
            "ADDED", {"metadata": {"name": name, "namespace": namespace, "labels": labels}}
        )

    def modify(self, key: str, **data: str) -> None:
        o = copy.deepcopy(self.objects[key])
        o.setdefault("data", {}).update(data)
        self._commit("MODIFIED", o)

    def remove(self, key: str) -> None:
        self._commit("DELETED", self.objects[key])

    def compact(self) -> None:
        self.floor = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        for _, _, queue in self._watchers:
            queue.put_nowait(("BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}}))

    def drop_watches(self) -> None:
        for _, _, queue in self._watchers:
            queue.put_nowait(None)

    def hold_watches(self) -> None:
        """New watch requests wait until `release_watches()`: lets a test change things in
        between."""
        self._open.clear()

    def release_watches(self) -> None:
        self._open.set()

    # --- the ListerWatcher protocol ------------------------------------------------------------
    async def list(
        self,
        namespace: str | None,
        label_selector: str | None,
        *,
        transform: Transform | None = None,
    ) -> tuple[list[Obj], str]:
        self.list_calls.append((namespace, label_selector))
        if self.list_failures:
            self.list_failures -= 1
            raise errors.TransientError("connection refused")
        items = [
            copy.deepcopy(o)
            for o in self.objects.values()
            if _matches(o, namespace, label_selector)
        ]
        return [transform(o) for o in items] if transform else items, str(self.rv)

    async def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_calls.append((namespace, label_selector, resource_version))
        await self._open.wait()
        start = int(resource_version or 0)
        if start < self.floor:
            if self.gone_as == "http":
                raise errors.Gone(410, "Expired", "too old resource version")
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
            return
        queue: asyncio.Queue[tuple[str, Obj] | None] = asyncio.Queue()
        entry = (namespace, label_selector, queue)
        self._watchers.append(entry)
        backlog = [(kind, o) for rv, kind, o in self.history if rv > start]
        try:
            for kind, o in backlog:
                if _matches(o, namespace, label_selector):
                    yield {"type": kind, "object": copy.deepcopy(o)}
            while (item := await queue.get()) is not None:
                yield {"type": item[0], "object": copy.deepcopy(item[1])}
        finally:
            self._watchers.remove(entry)


def _matches(o: Obj, namespace: str | None, selector: str | None) -> bool:
    meta = o.get("metadata") or {}
    if namespace and meta.get("namespace") != namespace:
        return False
    labels = meta.get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def on_add(self, o: Obj) -> None:
        self.calls.append(("add", object_key(o)))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.calls.append(
            (
                "update",
                object_key(new),
                old["metadata"]["resourceVersion"],
                new["metadata"]["resourceVersion"],
            )
        )

    def on_delete(self, o: Obj) -> None:
        self.calls.append(("delete", object_key(o)))

    def take(self) -> list[tuple[str, ...]]:
        calls, self.calls = self.calls, []
        return calls


class Running:
    """An informer over `api` on a flowing fake clock, with a recorder of its handler calls."""

    def __init__(self, api: MemoryApi, **kwargs: Any) -> None:
        self.api = api
        self.clock = FakeClock()
        self.informer = Informer(api, clock=self.clock, **kwargs)
        self.recorder = Recorder()
        self.informer.add_event_handler(
            on_add=self.recorder.on_add,
            on_update=self.recorder.on_update,
            on_delete=self.recorder.on_delete,
        )
        self.task: asyncio.Task[Any] | None = None
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Running:
        await self._stack.enter_async_context(self.clock.flowing())
        self.task = asyncio.create_task(self.informer.run())
        await asyncio.wait_for(self.informer.wait_for_sync(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self._stack.aclose()

    def keys(self) -> list[str]:
        return sorted(self.informer.store.list_keys())

    def in_step(self) -> bool:
        """Store equal to the server's objects, resourceVersions included (cluster-wide, no
        selector)."""
        mine = {object_key(o): o["metadata"]["resourceVersion"] for o in self.informer.store.list()}
        theirs = {k: o["metadata"]["resourceVersion"] for k, o in self.api.objects.items()}
        return mine == theirs


async def test_initial_list_fills_the_store_calls_on_add_and_marks_synced() -> None:
    api = MemoryApi()
    api.create("a")
    api.create("b")
    async with Running(api) as run:
        assert run.informer.has_synced
        assert run.keys() == ["ns/a", "ns/b"]
        assert sorted(run.recorder.take()) == [("add", "ns/a"), ("add", "ns/b")]
        assert api.watch_calls == [(None, None, "2")], "watches from the list's resourceVersion"


async def test_transform_shapes_what_lists_and_watch_events_store_and_hand_on() -> None:
    def slim(o: Obj) -> Obj:
        return {"metadata": {k: o["metadata"][k] for k in ("name", "namespace", "resourceVersion")}}

    api = MemoryApi()
    api.create("listed", role="x")
    seen: list[Obj] = []
    async with Running(api, transform=slim) as run:
        run.informer.add_event_handler(on_update=lambda _old, new: seen.append(new))
        api.create("watched", role="x")
        api.modify("ns/listed", x="1")
        await eventually(lambda: len(run.recorder.calls) == 3)
        stored = {object_key(o): o for o in run.informer.store.list()}
        assert stored == {
            "ns/listed": {
                "metadata": {"name": "listed", "namespace": "ns", "resourceVersion": "3"}
            },
            "ns/watched": {
                "metadata": {"name": "watched", "namespace": "ns", "resourceVersion": "2"}
            },
        }
        assert seen == [stored["ns/listed"]], "handlers get what the store keeps"
        assert api.list_calls == [(None, None)]


async def test_watch_events_reach_store_and_handlers_in_order() -> None:
    api = MemoryApi()
    async with Running(api) as run:
        api.create("a")
        api.modify("ns/a", x="1")
        api.remove("ns/a")
        await eventually(lambda: len(run.recorder.calls) == 3)
        assert run.recorder.take() == [
            ("add", "ns/a"),
            ("update", "ns/a", "1", "2"),
            ("delete", "ns/a"),
        ]
        assert run.keys() == []
        assert run.informer.reflectors[0].last_sync_resource_version == "3"


@pytest.mark.parametrize("gone_as", ["event", "http"], ids=["error-event-410", "http-410"])
async def test_410_relists_and_reports_what_was_missed_exactly_once(
    gone_as: Literal["http", "event"],
) -> None:
    api = MemoryApi(gone_as=gone_as)
    for name in "abc":
        api.create(name)
    async with Running(api) as run:
        run.recorder.take()
        api.hold_watches()
        api.drop_watches()
        await eventually(lambda: len(api.watch_calls) == 2)
        api.remove("ns/a")
        api.modify("ns/b", x="1")
        api.create("d")
        api.compact()
        api.release_watches()
        await eventually(lambda: run.informer.reflectors[0].lists == 2)
        await eventually(run.in_step)
        assert sorted(run.recorder.take()) == [
            ("add", "ns/d"),
            ("delete", "ns/a"),
            ("update", "ns/b", "2", "5"),
        ]
        assert run.keys() == ["ns/b", "ns/c", "ns/d"]
        api.create("e")  # and the new watch works
        await eventually(lambda: run.recorder.calls == [("add", "ns/e")])


async def test_dropped_watch_resumes_from_the_last_resource_version_without_relisting() -> None:
    api = MemoryApi()
    api.create("a")
    async with Running(api) as run:
        run.recorder.take()
        api.hold_watches()
        api.drop_watches()
        await eventually(lambda: len(api.watch_calls) == 2)
        api.modify("ns/a", x="1")
        api.create("b")
        api.release_watches()
        await eventually(lambda: len(run.recorder.calls) == 2)
        assert run.recorder.take() == [("update", "ns/a", "1", "2"), ("add", "ns/b")]
        assert api.watch_calls[1] == (None, None, "1")
        assert run.informer.reflectors[0].lists == 1
        assert len(api.list_calls) == 1


async def test_bookmarks_advance_the_resource_version_so_a_resume_needs_no_relist() -> None:
    api = MemoryApi()
    api.create("a", "ns")
    async with Running(api, namespaces=["ns"]) as run:
        for i in range(5):
            api.create(f"x{i}", "elsewhere")  # advances the server's rv, invisible to our watch
        api.bookmark()
        await eventually(lambda: run.informer.reflectors[0].last_sync_resource_version == "6")
        api.compact()
        api.drop_watches()
        await eventually(lambda: len(api.watch_calls) == 2)
        assert api.watch_calls[1] == ("ns", None, "6")
        # A fence: had the resumed watch been refused (410), a relist would come before the fence.
        api.create("fence", "ns")
        await eventually(lambda: run.informer.store.get("ns/fence") is not None)
        assert run.informer.reflectors[0].lists == 1
        assert run.recorder.take() == [("add", "ns/a"), ("add", "ns/fence")]


async def test_failed_lists_are_retried_with_backoff() -> None:
    api = MemoryApi()
    api.create("a")
    api.list_failures = 2
    async with Running(api) as run:
        assert len(api.list_calls) == 3
        assert run.keys() == ["ns/a"]
        # Two waits of 0.8 s and 1.6 s, each stretched by up to half again (jitter), on the fake
        # clock.
        assert 0.8 + 1.6 <= run.clock.now() <= 1.5 * (0.8 + 1.6)


async def test_same_resource_version_updates_are_dropped_on_relist() -> None:
    api = MemoryApi()
    api.create("a")
    async with Running(api) as run:
        run.recorder.take()
        api.hold_watches()
        api.drop_watches()
        await eventually(lambda: len(api.watch_calls) == 2)
        api.create("short-lived")
        api.remove("ns/short-lived")
        api.compact()
        api.release_watches()
        await eventually(lambda: run.informer.reflectors[0].lists == 2)
        assert run.recorder.take() == [], (
            "a relist that found nothing new must not look like updates"
        )
        assert run.keys() == ["ns/a"]


async def test_one_reflector_per_namespace_each_relisting_only_its_own_slice() -> None:
    api = MemoryApi()
    api.create("a", "n1")
    api.create("b", "n2")
    api.create("c", "n3")
    async with Running(api, namespaces=["n1", "n2"]) as run:
        assert run.keys() == ["n1/a", "n2/b"]
        assert sorted(str(ns) for ns, _ in api.list_calls) == ["n1", "n2"]
        api.hold_watches()
        api.drop_watches()
        await eventually(lambda: len(api.watch_calls) == 4)
        api.remove("n1/a")
        api.compact()
        api.release_watches()
        await eventually(lambda: all(r.lists == 2 for r in run.informer.reflectors))
        assert run.keys() == ["n2/b"]
        assert ("delete", "n1/a") in run.recorder.take()


async def test_label_selector_is_passed_to_list_and_watch() -> None:
    api = MemoryApi()
    api.create("mine", app="x")
    api.create("theirs", app="y")
    async with Running(api, label_selector="app=x") as run:
        api.create("mine2", app="x")
        api.create("theirs2", app="y")
        await eventually(lambda: run.keys() == ["ns/mine", "ns/mine2"])
        assert all(selector == "app=x" for _, selector, _ in api.watch_calls)


async def test_a_failing_handler_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = MemoryApi()
    informer = Informer(api, clock=FakeClock(), name="things")
    seen: list[str] = []

    def broken(o: Obj) -> None:
        raise RuntimeError("boom")

    informer.add_event_handler(on_add=broken)
    informer.add_event_handler(on_add=lambda o: seen.append(object_key(o)))
    api.create("a")
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 30)
        with caplog.at_level(logging.ERROR):
            api.create("b")
            await eventually(lambda: seen == ["ns/a", "ns/b"])
        assert "boom" in caplog.text
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


class EmptyStreams:
    """A ListerWatcher whose lists fail `failures` times and whose watches end at once, empty."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.lists = 0
        self.watches = 0

    async def list(
        self,
        namespace: str | None,
        label_selector: str | None,
        *,
        transform: Transform | None = None,
    ) -> tuple[list[Obj], str]:
        self.lists += 1
        if self.failures:
            self.failures -= 1
            raise errors.ServerError(500, "InternalError")
        return [], "10"

    async def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        for _ in ():
            yield {}


class CountingStore:
    """The reflector's side of a store, counting what it is told."""

    def __init__(self) -> None:
        self.replaced = 0

    def replace(self, items: list[Obj], resource_version: str) -> None:
        self.replaced += 1

    def add(self, obj: Obj) -> None: ...

    def update(self, obj: Obj) -> None: ...

    def delete(self, obj: Obj) -> None: ...


@pytest.mark.parametrize(
    ("failures", "lists_at_each_wait", "watches_at_each_wait"),
    [
        (0, [1, 1, 1, 1], [1, 2, 3, 4]),
        (3, [1, 2, 3, 4], [0, 0, 0, 1]),
    ],
    ids=["empty-watches-back-off", "failed-lists-back-off"],
)
async def test_failures_back_off_exponentially_instead_of_hot_looping(
    failures: int, lists_at_each_wait: list[int], watches_at_each_wait: list[int]
) -> None:
    clock = FakeClock()
    api = EmptyStreams(failures)
    backoff = Backoff(0.8, 30.0, jitter=0.0, clock=clock)
    store = CountingStore()
    reflector = Reflector(api, store, clock=clock, backoff=backoff)
    task = asyncio.create_task(reflector.run())
    try:
        lists, watches, waits = [], [], []
        start = clock.now()
        for _ in range(4):
            await (
                clock.parked()
            )  # the reflector waits on the clock: nothing more happens until it moves
            lists.append(api.lists)
            watches.append(api.watches)
            waits.append(clock.advance_to_next() - start)
            start = clock.now()
        assert lists == lists_at_each_wait
        assert watches == watches_at_each_wait
        assert waits == pytest.approx([0.8, 1.6, 3.2, 6.4])
        assert store.replaced == 1
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
