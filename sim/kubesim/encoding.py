"""JSON encoding of API answers, with the bytes of each stored object version cached.

A stored object is never mutated (`kubesim.store`), so it is encoded once for the write that stored
it, every watcher and every GET or LIST; the cache is keyed by the object's identity and holds the
object, so an identity is never reused while cached. orjson writes the bytes
(docs/architecture.md#decisions-and-why): compact UTF-8 as the apiserver writes it, the same bytes
as `json.dumps(..., separators=(",", ":"), ensure_ascii=False)` for API objects. What it refuses
(integers beyond 64 bits, lone surrogates) the standard library writes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import orjson

_SEPARATORS = (",", ":")


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=_SEPARATORS).encode()


class ObjectEncoder:
    """JSON bytes of immutable objects (stored versions), least recently used first out."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._cache: OrderedDict[int, tuple[dict[str, Any], bytes]] = OrderedDict()
        self.hits = 0

    def object(self, obj: dict[str, Any]) -> bytes:
        """`obj` as JSON; `obj` must never change afterwards (a stored object, or one made for an
        answer)."""
        key = id(obj)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is obj:
            self._cache.move_to_end(key)
            self.hits += 1
            return hit[1]
        data = dumps(obj)
        self._cache[key] = (obj, data)
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return data

    def object_list(self, listed: dict[str, Any]) -> bytes:
        """A `<Kind>List` whose items are stored objects: the items' cached bytes, spliced."""
        head = dumps({k: v for k, v in listed.items() if k != "items"})
        items = b",".join(self.object(item) for item in listed.get("items") or [])
        return head[:-1] + (b',"items":[' if len(head) > 2 else b'"items":[') + items + b"]}"

    def event(self, event_type: str, obj: dict[str, Any]) -> bytes:
        """One watch event line (without the newline) carrying a stored object."""
        return b'{"type":' + dumps(event_type) + b',"object":' + self.object(obj) + b"}"
