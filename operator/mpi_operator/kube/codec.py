"""JSON of request bodies, responses and watch events: orjson, with the standard library behind it.

orjson because every created object is encoded once and decoded twice, from the answer and from the
watch (docs/architecture.md#decisions-and-why has the figure). Where the two differ, the stdlib's
way is kept: what orjson refuses to read (`NaN`, a byte order mark, a lone surrogate, a number out
of a double's range) or to write (integers past 64 bits) goes to the stdlib, and non-string keys
become strings as `json.dumps` makes them. Left different: orjson reads an integer outside [-2**63,
2**64) as a float (an API server never sends one), and writes NaN and infinities as null (which
`json.dumps` writes as words no API server accepts).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS


def loads(data: bytes | str) -> Any:
    """The JSON document `data` as Python objects; raises `json.JSONDecodeError` (a
    `ValueError`)."""
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
