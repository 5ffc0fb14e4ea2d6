"""Reflector + informer over real HTTP against kubesim: relist on 410, resume after dropped watches,
bookmarks, and a store that stays equal to the server's state under churn.

The reflectors' backoffs run on a `FakeClock`: a test that needs a backoff to pass moves the
clock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.store import object_key
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube

SELECTOR = "app=rt"


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(bookmark_seconds=0.2)


class Events:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def handlers(self) -> dict[str, Callable[..., None]]:
        return {
            "on_add": lambda o: self.log.append(("add", object_key(o))),
            "on_update": lambda old, new: self.log.append(("update", object_key(new))),
            "on_delete": lambda o: self.log.append(("delete", object_key(o))),
        }


@pytest_asyncio.fixture
async def informer(kube: Kube, fake_clock: FakeClock) -> AsyncIterator[tuple[Informer, Events]]:
    inf = Informer(
        kube.lister_watcher(resources.CONFIG_MAP),
        namespaces=["default"],
        label_selector=SELECTOR,
        name="configmaps",
        clock=fake_clock,
    )
    events = Events()
    inf.add_event_handler(**events.handlers())
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.wait_for_sync(), 30)
        yield inf, events
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def configmap(name: str, *, labelled: bool = True, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "rt" if labelled else "other"},
        },
        "data": data,
    }


async def server_state(kube: Kube) -> dict[str, str]:
    items, _ = await kube.list(resources.CONFIG_MAP, "default", label_selector=SELECTOR)
    return {object_key(o): o["metadata"]["resourceVersion"] for o in items}


def store_state(inf: Informer) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in inf.store.list()}


async def until_in_step(kube: Kube, inf: Informer) -> None:
    async def in_step() -> bool:
        assert store_state(inf) == await server_state(kube)  # a fresh LIST each time
        return True

    caught_up: bool = await eventually(in_step, what="the store to equal the server's state")
    assert caught_up


async def test_initial_list_and_watch_only_see_labelled_objects(
    kube: Kube, kubesim: KubeSim, informer: tuple[Informer, Events]
) -> None:
    inf, events = informer
    await kube.create(resources.CONFIG_MAP, configmap("mine"))
    await kube.create(resources.CONFIG_MAP, configmap("theirs", labelled=False))
    await eventually(lambda: events.log == [("add", "default/mine")])
    assert list(store_state(inf)) == ["default/mine"]
    for request in kubesim.control.recorded(resource="configmaps", user_agent="mpi-operator"):
        if request.verb in ("list", "watch"):
            assert "labelSelector=app%3Drt" in request.query


async def test_gone_relists_and_the_store_catches_up_with_missed_changes(
    kube: Kube, kubesim: KubeSim, fake_clock: FakeClock, informer: tuple[Informer, Events]
) -> None:
    inf, events = informer
    for name in ("a", "b"):
        await kube.create(resources.CONFIG_MAP, configmap(name))
    await until_in_step(kube, inf)
    events.log.clear()
    # Keep the reflector from re-watching while the world changes and history is compacted: its
    # re-watch fails and it backs off, on the clock, until the test moves time on.
    kubesim.control.inject_error(500, method="GET", path="/configmaps$", count=None)
    kubesim.control.drop_watches()
    await fake_clock.parked()
    await kube.delete(resources.CONFIG_MAP, "a", namespace="default")
    await kube.patch(resources.CONFIG_MAP, "b", {"data": {"k": "v"}}, namespace="default")
    await kube.create(resources.CONFIG_MAP, configmap("c"))
    kubesim.control.compact()
    kubesim.control.clear_faults()
    reflector = inf.reflectors[0]
    assert reflector.lists == 1
    await fake_clock.run_until(eventually(lambda: reflector.lists == 2))
    await until_in_step(kube, inf)
    assert sorted(events.log) == [
        ("add", "default/c"),
        ("delete", "default/a"),
        ("update", "default/b"),
    ]


async def test_dropped_watches_resume_from_the_last_resource_version(
    kube: Kube, kubesim: KubeSim, informer: tuple[Informer, Events]
) -> None:
    inf, events = informer
    await kube.create(resources.CONFIG_MAP, configmap("a"))
    await until_in_step(kube, inf)
    reflector = inf.reflectors[0]
    for round_ in range(3):
        watches = reflector.watches

        def rewatched(before: int = watches) -> bool:
            return reflector.watches > before and kubesim.control.open_watches() > 0

        assert kubesim.control.drop_watches() >= 1
        await eventually(rewatched)
        await kube.patch(
            resources.CONFIG_MAP, "a", {"data": {"round": str(round_)}}, namespace="default"
        )
        await until_in_step(kube, inf)
    assert reflector.lists == 1, "a dropped stream is resumed, not relisted"
    resumed = kubesim.control.recorded(verb="watch", resource="configmaps")[1:]
    assert len(resumed) >= 3
    assert all("resourceVersion=" in r.query for r in resumed)
    assert [kind for kind, _ in events.log] == ["add", "update", "update", "update"]


async def test_bookmarks_keep_the_resource_version_fresh_so_compaction_needs_no_relist(
    kube: Kube, kubesim: KubeSim, informer: tuple[Informer, Events]
) -> None:
    inf, _ = informer
    for i in range(5):
        await kube.create(resources.CONFIG_MAP, configmap(f"other-{i}", labelled=False))
    reflector = inf.reflectors[0]
    target = str(kubesim.control.resource_version)
    await eventually(lambda: reflector.last_sync_resource_version == target)
    kubesim.control.compact()
    kubesim.control.drop_watches()
    watches = reflector.watches
    await eventually(lambda: reflector.watches > watches and kubesim.control.open_watches() > 0)
    # A fence: had the re-watch from `target` been refused (410), the reflector would have relisted
    # before anything created now could reach its store.
    await kube.create(resources.CONFIG_MAP, configmap("fence"))
    await eventually(lambda: "default/fence" in store_state(inf))
    assert reflector.lists == 1
    last_watch = kubesim.control.recorded(verb="watch", resource="configmaps")[-1]
    assert f"resourceVersion={target}" in last_watch.query


async def test_store_equals_the_server_under_churn_drops_and_compaction(
    kube: Kube, kubesim: KubeSim, fake_clock: FakeClock, informer: tuple[Informer, Events]
) -> None:
    inf, _ = informer
    rng = random.Random(7)
    names = [f"churn-{i}" for i in range(12)]
    async with (
        fake_clock.flowing()
    ):  # a stream dropped before it delivered anything backs off: let it
        await churn(kube, kubesim, rng, names)
        await until_in_step(kube, inf)
    assert store_state(inf), "the churn left some labelled objects behind"
    assert inf.reflectors[0].lists >= 2, "compaction forced at least one relist"
    assert inf.reflectors[0].watches >= 5


async def churn(kube: Kube, kubesim: KubeSim, rng: random.Random, names: list[str]) -> None:
    for step in range(150):
        name = rng.choice(names)
        try:
            roll = rng.random()
            if roll < 0.4:
                await kube.create(
                    resources.CONFIG_MAP, configmap(name, labelled=rng.random() < 0.8)
                )
            elif roll < 0.75:
                await kube.patch(
                    resources.CONFIG_MAP, name, {"data": {"s": str(step)}}, namespace="default"
                )
            elif roll < 0.85:
                # relabelling moves an object out of (or into) the selected set
                labels = {"app": rng.choice(["rt", "other"])}
                await kube.patch(
                    resources.CONFIG_MAP,
                    name,
                    {"metadata": {"labels": labels}},
                    namespace="default",
                )
            else:
                await kube.delete(resources.CONFIG_MAP, name, namespace="default")
        except (errors.NotFound, errors.AlreadyExists):
            pass
        if step % 25 == 10:
            kubesim.control.drop_watches()
        if step % 40 == 20:
            # An invisible change first, so the reflector's resourceVersion falls behind the floor.
            await kube.create(resources.CONFIG_MAP, configmap(f"invisible-{step}", labelled=False))
            kubesim.control.compact()
            kubesim.control.drop_watches()
