"""Properties of the in-process cluster: filtered watches rebuild filtered lists, pages rebuild
lists."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim import builtins, errors
from kubesim.cluster import Cluster, WatchEvent
from kubesim.settings import SimSettings

NAMES = ("a", "b", "c", "d")
OPS = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.sampled_from(["create", "hot", "cold", "unlabel", "data", "delete"]),
    ),
    max_size=25,
)
MERGE = "application/merge-patch+json"


def _apply(cluster: Cluster, name: str, op: str) -> None:
    cm = builtins.CONFIGMAPS
    patches = {
        "hot": b'{"metadata":{"labels":{"tier":"hot"}}}',
        "cold": b'{"metadata":{"labels":{"tier":"cold"}}}',
        "unlabel": b'{"metadata":{"labels":null}}',
        "data": b'{"data":{"n":"' + name.encode() + b'"}}',
    }
    with contextlib.suppress(errors.StatusError):  # 404/409 are part of the random walk
        if op == "create":
            cluster.create(cm, "default", {"metadata": {"name": name, "labels": {"tier": "hot"}}})
        elif op == "delete":
            cluster.delete(cm, "default", name)
        else:
            cluster.patch(cm, "default", name, patches[op], MERGE)


async def _drain(events: Any) -> list[WatchEvent]:
    """Events up to the next BOOKMARK, which comes only once everything committed was delivered."""
    seen: list[WatchEvent] = []
    async for event in events:
        if event.type == "BOOKMARK":
            return seen
        seen.append(event)
    raise AssertionError("the watch ended")


@settings(max_examples=60, deadline=None)
@given(before=OPS, after=OPS)
def test_a_filtered_watch_rebuilds_the_filtered_list(
    before: list[tuple[str, str]], after: list[tuple[str, str]]
) -> None:
    async def scenario() -> None:
        cluster = Cluster(SimSettings(bookmark_seconds=0.001))
        for name, op in before:
            _apply(cluster, name, op)
        events = cluster.watch(
            builtins.CONFIGMAPS,
            "default",
            resource_version="0",
            label_selector="tier=hot",
            allow_bookmarks=True,
        )
        initial = await _drain(events)  # the watch starts when first iterated
        for name, op in after:
            _apply(cluster, name, op)
        live = await _drain(events)
        await events.aclose()  # type: ignore[attr-defined]
        cache: dict[str, dict[str, Any]] = {}
        for event in initial + live:
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                assert name in cache
                del cache[name]
            else:
                assert (event.type == "ADDED") == (name not in cache)
                cache[name] = event.object
        listed = cluster.list(builtins.CONFIGMAPS, "default", label_selector="tier=hot")
        assert sorted(cache) == [o["metadata"]["name"] for o in listed["items"]]
        assert all(cache[o["metadata"]["name"]] == o for o in listed["items"])
        versions = [int(e.object["metadata"]["resourceVersion"]) for e in live]
        assert versions == sorted(set(versions))  # live events arrive once each, in commit order
        assert all(e.type == "ADDED" for e in initial)

    asyncio.run(scenario())


@settings(max_examples=40, deadline=None)
@given(count=st.integers(0, 12), limit=st.integers(1, 5), churn=OPS)
def test_pages_rebuild_the_list_they_started_from(
    count: int, limit: int, churn: list[tuple[str, str]]
) -> None:
    cluster = Cluster()
    for i in range(count):
        cluster.create(builtins.CONFIGMAPS, "default", {"metadata": {"name": f"cm{i:02}"}})
    full = cluster.list(builtins.CONFIGMAPS, "default")
    pages = [cluster.list(builtins.CONFIGMAPS, "default", limit=limit)]
    for name, op in churn:  # writes between pages must not show up in later pages
        _apply(cluster, name, op)
    while token := pages[-1]["metadata"].get("continue"):
        pages.append(
            cluster.list(builtins.CONFIGMAPS, "default", limit=limit, continue_token=token)
        )
    assert [i for p in pages for i in p["items"]] == full["items"]
    assert {p["metadata"]["resourceVersion"] for p in pages} == {
        full["metadata"]["resourceVersion"]
    }


async def test_bad_selector_raises_at_once_and_expired_watch_is_an_error_event() -> None:
    cluster = Cluster()
    with pytest.raises(errors.StatusError) as err:
        cluster.watch(builtins.CONFIGMAPS, "default", label_selector="a in (")
    assert err.value.code == 400
    cluster.store.compact()
    events = cluster.watch(builtins.CONFIGMAPS, "default", resource_version="1")
    event = await anext(events)
    assert (event.type, event.object["code"], event.object["reason"]) == ("ERROR", 410, "Expired")
    with pytest.raises(StopAsyncIteration):
        await anext(events)
