"""The last few MPIJobs parsed, so the syncs of one job version do not parse and validate it again.

A job's children change many times while its own object does not (each pod event is a sync of the
same MPIJob version), and pydantic's parse and the cross-field validation of the same spec were a
tenth of the operator's CPU per sync. An object is identified by its uid and resourceVersion: any
change to it, status included, is a new version and is parsed anew. The cache holds the most
recently used `size` versions only, so its memory does not grow with the number of jobs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mpi_operator.api import parse_and_validate
from mpi_operator.api.normalize import Normalized
from mpi_operator.objects import resource_version, uid_of

DEFAULT_SIZE = 64


class ParsedJobs:
    def __init__(self, *, gpus_per_node: int, max_workers: int, size: int = DEFAULT_SIZE) -> None:
        self._gpus_per_node = gpus_per_node
        self._max_workers = max_workers
        self._size = size
        self._cache: OrderedDict[tuple[str, str | None, str], Normalized] = OrderedDict()

    def parse(self, key: str, raw: Mapping[str, Any], obj: Mapping[str, Any]) -> Normalized:
        """`parse_and_validate(obj)` for the stored object `raw` (`obj`: it with apiVersion and kind);
        raises `InvalidMPIJob` as that does (invalid versions are not kept)."""
        version = resource_version(raw)
        ident = (key, uid_of(raw), version)
        hit = self._cache.get(ident) if version else None
        if hit is not None:
            self._cache.move_to_end(ident)
            return hit
        parsed = parse_and_validate(obj, gpus_per_node=self._gpus_per_node, max_workers=self._max_workers)
        if version:
            self._cache[ident] = parsed
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return parsed

    def __len__(self) -> int:
        return len(self._cache)
