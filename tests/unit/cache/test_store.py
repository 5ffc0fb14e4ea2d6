"""Store/Indexer: keys, reads, namespace and controller-owner indexes, full and scoped replace."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.cache.store import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    Store,
    object_key,
    split_key,
)
from mpi_operator.objects import controller_uid


def obj(
    name: str,
    namespace: str | None = "ns",
    *,
    owner: str | None = None,
    controller: bool = True,
    rv: str = "1",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "X", "name": "o", "uid": owner, "controller": controller}
        ]
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("o", "key", "split"),
    [
        (obj("a"), "ns/a", ("ns", "a")),
        (obj("node-1", None), "node-1", (None, "node-1")),
        ({"metadata": {"name": "x", "namespace": ""}}, "x", (None, "x")),
    ],
    ids=["namespaced", "cluster-scoped", "empty-namespace"],
)
def test_object_key_is_meta_namespace_key(
    o: dict[str, Any], key: str, split: tuple[str | None, str]
) -> None:
    assert object_key(o) == key
    assert split_key(key) == split


@pytest.mark.parametrize(
    ("refs", "uid"),
    [
        ([], None),
        ([{"uid": "u1", "controller": False}], None),
        ([{"uid": "u1"}, {"uid": "u2", "controller": True}], "u2"),
    ],
    ids=["no-owner", "owner-not-controller", "controller-among-owners"],
)
def test_controller_uid_is_the_controller_owner_only(
    refs: list[dict[str, Any]], uid: str | None
) -> None:
    assert controller_uid({"metadata": {"ownerReferences": refs}}) == uid


def test_upsert_get_delete_and_indexes_follow_changes() -> None:
    store = Store()
    assert not store.has_synced
    a = obj("a", owner="job-1")
    assert store.upsert(a) is None
    assert store.get("ns/a") is a, "the store hands out the object itself, never a copy"
    assert store.by_index(CONTROLLER_UID_INDEX, "job-1") == [a]
    moved = obj("a", owner="job-2", rv="2")
    assert store.upsert(moved) is a
    assert store.by_index(CONTROLLER_UID_INDEX, "job-1") == []
    assert store.by_index(CONTROLLER_UID_INDEX, "job-2") == [moved]
    assert store.controlled_by("job-2") == [moved]
    store.upsert(obj("b", "other"))
    assert sorted(store.list_keys()) == ["ns/a", "other/b"]
    assert [object_key(o) for o in store.by_index(NAMESPACE_INDEX, "other")] == ["other/b"]
    assert store.delete("ns/a") is moved
    assert store.delete("ns/a") is None
    assert store.by_index(CONTROLLER_UID_INDEX, "job-2") == []
    assert "ns/a" not in store
    assert len(store) == 1


def test_replace_swaps_everything_and_marks_synced() -> None:
    store = Store()
    store.upsert(obj("old", owner="j"))
    previous = store.replace([obj("new", owner="j", rv="5")], "7")
    assert list(previous) == ["ns/old"]
    assert store.list_keys() == ["ns/new"]
    assert [object_key(o) for o in store.by_index(CONTROLLER_UID_INDEX, "j")] == ["ns/new"]
    assert store.has_synced
    assert store.resource_version == "7"


def test_replace_scoped_to_a_namespace_leaves_the_others_alone() -> None:
    store = Store()
    store.replace([obj("a", "one"), obj("b", "two"), obj("c", "two")], "1")
    previous = store.replace([obj("d", "two")], "2", namespace="two")
    assert sorted(previous) == ["two/b", "two/c"]
    assert sorted(store.list_keys()) == ["one/a", "two/d"]
    assert [object_key(o) for o in store.by_index(NAMESPACE_INDEX, "two")] == ["two/d"]


def test_unknown_index_is_an_error_and_custom_indexers_replace_the_defaults() -> None:
    store = Store({"by-name": lambda o: [o["metadata"]["name"]]})
    store.upsert(obj("a"))
    assert [object_key(o) for o in store.by_index("by-name", "a")] == ["ns/a"]
    with pytest.raises(KeyError, match="namespace"):
        store.by_index(NAMESPACE_INDEX, "ns")


operations = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["n1", "n2"]),
        st.sampled_from([None, "u1", "u2"]),
    ),
    max_size=40,
)


@given(ops=operations)
def test_indexes_always_equal_a_recomputation_from_the_items(
    ops: list[tuple[str, str, str, str | None]],
) -> None:
    store = Store()
    model: dict[str, dict[str, Any]] = {}
    for op, name, namespace, owner in ops:
        if op == "upsert":
            o = obj(name, namespace, owner=owner)
            store.upsert(o)
            model[object_key(o)] = o
        else:
            store.delete(f"{namespace}/{name}")
            model.pop(f"{namespace}/{name}", None)
    assert sorted(store.list_keys()) == sorted(model)
    for uid in ("u1", "u2"):
        expected = sorted(k for k, o in model.items() if controller_uid(o) == uid)
        assert sorted(store.index_keys(CONTROLLER_UID_INDEX, uid)) == expected
    for namespace in ("n1", "n2"):
        expected = sorted(k for k in model if k.startswith(f"{namespace}/"))
        assert sorted(store.index_keys(NAMESPACE_INDEX, namespace)) == expected
