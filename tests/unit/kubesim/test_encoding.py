"""kubesim.encoding: the cached JSON of stored objects is byte for byte compact UTF-8 JSON
(json.dumps with `ensure_ascii=False`), and what orjson cannot write still comes out as JSON of the
same value."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubesim.encoding import ObjectEncoder

JSON_VALUES = st.recursive(
    # 64-bit integers: what API objects hold (larger ones take the fallback, tested below)
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4)


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@given(OBJECTS, st.lists(OBJECTS, max_size=4), st.booleans())
def test_objects_lists_and_events_encode_as_json_dumps(
    obj: dict[str, Any], items: list[dict[str, Any]], with_meta: bool
) -> None:
    encoder = ObjectEncoder()
    listed: dict[str, Any] = (
        {"kind": "ConfigMapList", "metadata": {"resourceVersion": "7"}} if with_meta else {}
    )
    listed["items"] = items
    for _ in range(2):  # the second round comes from the cache
        assert encoder.object(obj) == compact(obj)
        assert encoder.object_list(listed) == compact(listed)
        assert encoder.event("MODIFIED", obj) == compact({"type": "MODIFIED", "object": obj})


def test_a_version_is_encoded_once_and_an_equal_new_object_on_its_own() -> None:
    encoder = ObjectEncoder(size=2)
    stored = {"metadata": {"name": "a", "resourceVersion": "1"}}
    encoder.object(stored)
    encoder.event("ADDED", stored)
    assert encoder.hits == 1
    other = {"metadata": {"name": "a", "resourceVersion": "1"}}
    encoder.object(other)
    assert encoder.hits == 1
    for i in range(3):  # the bound evicts the oldest
        encoder.object({"n": i})
    encoder.object(stored)
    assert encoder.hits == 1


def test_what_orjson_refuses_is_written_by_the_standard_library() -> None:
    # A custom resource's free-form field can hold any integer; a JSON body can escape a lone
    # surrogate.
    encoder = ObjectEncoder()
    big = {"spec": {"big": 2**70, "small": -(2**64)}, "name": "é"}
    surrogate = {"data": {"k": "\ud800"}}
    for obj in (big, surrogate):
        assert json.loads(encoder.object(obj)) == obj
        assert json.loads(encoder.event("ADDED", obj)) == {"type": "ADDED", "object": obj}
        listed = {"kind": "List", "items": [obj, {"plain": "ü"}]}
        assert json.loads(encoder.object_list(listed)) == listed
