"""kubesim.store: resourceVersions, bounded history and compaction, watcher buffers, list
snapshots."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import errors
from kubesim.store import Store, clone

KEY = ("", "configmaps")


def obj(name: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, **extra}


def test_commits_get_consecutive_resource_versions() -> None:
    store = Store(history_size=10)
    changes = [store.commit("ADDED", KEY, obj(f"o{i}"), None) for i in range(3)]
    assert [c.rv for c in changes] == [1, 2, 3]
    assert [c.object["metadata"]["resourceVersion"] for c in changes] == ["1", "2", "3"]
    assert store.resource_version == 3


def test_deleted_removes_and_objects_are_ordered_by_namespace_then_name() -> None:
    store = Store(history_size=10)
    for ns, name in [("b", "x"), ("a", "y"), ("a", "x")]:
        store.commit("ADDED", KEY, obj(name, ns), None)
    store.commit("DELETED", KEY, obj("y", "a"), None)
    assert [
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.objects(KEY, None)
    ] == [
        ("a", "x"),
        ("b", "x"),
    ]
    assert store.get(KEY, "a", "y") is None
    assert store.count(KEY) == 2


def test_history_is_bounded_and_older_versions_expire() -> None:
    store = Store(history_size=3)
    for i in range(5):
        store.commit("ADDED", KEY, obj(f"o{i}"), None)
    assert store.changes_since(KEY, None, 1) is None
    replay = store.changes_since(KEY, None, 2)
    assert replay is not None
    assert [c.rv for c in replay] == [3, 4, 5]


def test_compaction_expires_everything_up_to_the_given_version() -> None:
    store = Store(history_size=100)
    for i in range(4):
        store.commit("ADDED", KEY, obj(f"o{i}"), None)
    assert store.compact(2) == 2
    assert store.changes_since(KEY, None, 1) is None
    assert [c.rv for c in store.changes_since(KEY, None, 2) or []] == [3, 4]
    store.compact()
    assert store.changes_since(KEY, None, 3) is None
    assert store.changes_since(KEY, None, 4) == []


def test_replay_is_per_resource_and_namespace() -> None:
    store = Store(history_size=100)
    store.commit("ADDED", KEY, obj("a", "one"), None)
    store.commit("ADDED", ("", "secrets"), obj("s", "one"), None)
    store.commit("ADDED", KEY, obj("b", "two"), None)
    assert [c.object["metadata"]["name"] for c in store.changes_since(KEY, "two", 0) or []] == ["b"]


async def test_watcher_receives_changes_and_overflow_closes_it() -> None:
    store = Store(history_size=100, watcher_buffer=2)
    watcher = store.watch(KEY, "default")
    store.commit("ADDED", KEY, obj("a"), None)
    store.commit("ADDED", KEY, obj("elsewhere", "other"), None)
    first = await watcher.next(0.1)
    assert first is not None
    assert first.object["metadata"]["name"] == "a"
    for i in range(3):
        store.commit("ADDED", KEY, obj(f"o{i}"), None)
    assert watcher.closed
    assert watcher.overflowed
    assert await watcher.next(0.1) is None


async def test_watcher_next_times_out_and_close_wakes_it() -> None:
    store = Store(history_size=10)
    watcher = store.watch(KEY, None)
    assert await watcher.next(0.01) is None
    assert not watcher.closed
    waiting = asyncio.create_task(watcher.next(None))
    await asyncio.sleep(0)
    assert store.close_watchers() == 1
    assert await asyncio.wait_for(waiting, 1) is None
    assert store.watchers() == []


def test_continue_tokens_page_a_snapshot_and_expire_on_compaction() -> None:
    store = Store(history_size=10)
    store.commit("ADDED", KEY, obj("a"), None)
    snap_id = store.save_snapshot(store.objects(KEY, None))
    token = store.continue_token(snap_id, 1, store.resource_version)
    snapshot, offset, found = store.load_snapshot(token)
    assert (len(snapshot.items), offset, found) == (1, 1, snap_id)
    store.commit("ADDED", KEY, obj("b"), None)
    store.compact()
    with pytest.raises(errors.StatusError) as err:
        store.load_snapshot(token)
    assert err.value.code == 410


def test_garbage_continue_token_is_400() -> None:
    with pytest.raises(errors.StatusError) as err:
        Store(history_size=1).load_snapshot("not-base64!")
    assert err.value.code == 400


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=20,
)


@given(JSON)
def test_clone_is_an_equal_deep_copy(value: Any) -> None:
    copied = clone(value)
    assert copied == value
    if isinstance(value, dict | list) and value:
        assert copied is not value
