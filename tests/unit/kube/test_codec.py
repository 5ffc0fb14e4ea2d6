"""`kube.codec`: orjson where it agrees with the standard library, the standard library where it
does not, so what the client sends and reads is what `json` made of it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.kube import codec

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_round_trips_as_the_standard_library_does(value: Any) -> None:
    encoded = codec.dumps(value)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == json.loads(json.dumps(value))
    assert codec.loads(encoded) == json.loads(json.dumps(value))
    assert codec.loads(json.dumps(value)) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": NaN, "b": -Infinity}',  # the stdlib's extension of JSON
        b'\xef\xbb\xbf{"a": 1}',  # a byte order mark
        b'{"a": 1e400}',  # out of a double's range: the stdlib reads inf
        b'{"a": 1, "a": 2}',  # the last duplicate wins in both
        '{"name": "caf\u00e9"}',  # a str, not bytes
    ],
)
def test_what_orjson_refuses_is_read_by_the_standard_library(text: bytes | str) -> None:
    decoded, expected = codec.loads(text), json.loads(text)
    assert json.dumps(decoded) == json.dumps(expected)  # NaN != NaN: compare the texts


def test_malformed_json_raises_the_standard_librarys_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        codec.loads(b'{"a": ')


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", None: "b", False: "c", 1.5: "d"},  # keys json.dumps turns into strings
        {"big": 2**70},  # past 64 bits: orjson refuses, the stdlib writes it
        {"small": -(2**70)},
        ("a", ["b"]),
    ],
)
def test_encodes_what_json_dumps_encodes(value: Any) -> None:
    assert json.loads(codec.dumps(value)) == json.loads(json.dumps(value))


def test_what_neither_encodes_raises_type_error() -> None:
    with pytest.raises(TypeError):
        codec.dumps({"a": b"bytes"})
    with pytest.raises(TypeError):
        codec.dumps({"a": object()})


def test_non_finite_floats_are_encoded_as_valid_json() -> None:
    """The one deliberate difference: orjson writes NaN as null, which a server can parse
    (json.dumps would write the bare words NaN and Infinity, which no API server accepts)."""
    assert json.loads(codec.dumps({"a": math.nan, "b": math.inf})) == {"a": None, "b": None}
