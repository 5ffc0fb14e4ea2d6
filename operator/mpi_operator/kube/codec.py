"""JSON of request bodies, responses and watch events: orjson, with the standard library behind it.

The stdlib's encoder and decoder were a sixth of the operator's CPU in a fan-in (every created object
is encoded once and decoded twice, from the answer and from the watch). orjson does both several times
faster. Where the two differ, what the stdlib does is kept: input orjson refuses (`NaN`, a byte order
mark, a lone surrogate, a number out of a double's range) and objects it will not encode (integers past
64 bits) go to the stdlib, and non-string keys become strings as `json.dumps` makes them. Two
differences are left. orjson reads an integer outside [-2**63, 2**64) as a float: an API server never
sends one (it holds numbers as Go's int64 or float64 and writes larger ones as floats). It writes NaN
and infinities as null, where `json.dumps` writes words that are not JSON and no API server accepts.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS


def loads(data: bytes | str) -> Any:
    """The JSON document `data` as Python objects; raises `json.JSONDecodeError` (a `ValueError`)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(obj: Any) -> bytes:
    """`obj` as UTF-8 JSON; raises `TypeError` for what `json.dumps` cannot encode either."""
    try:
        return orjson.dumps(obj, option=_DUMPS_OPTIONS)
    except TypeError:
        return json.dumps(obj).encode()
