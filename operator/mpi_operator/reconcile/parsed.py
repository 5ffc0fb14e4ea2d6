"""The last few MPIJobs parsed, so the syncs of one job version do not parse and validate it again.

Pydantic's parse and the cross-field validation of a spec cost about half a millisecond per sync. A
job whose pods change while its own object does not (a running elastic job's churn, pod events after
the last status write) is synced again and again at one version; those syncs now parse it once. In a
fan-in most syncs follow a status write, so they see a new version (about 300 parses for 315 syncs
at 100 jobs x 8 workers), unless the reconciler hands over what its status write returned
(`written`): only the status differs from the version parsed, so only the status is parsed. Any
other change to an object (uid and resourceVersion identify it) is parsed anew. Only the `size` most
recently used versions are kept, so the cache's memory does not grow with the number of jobs.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from mpi_operator.api import parse_and_validate
from mpi_operator.api.models import MPIJobStatus
from mpi_operator.api.normalize import Normalized
from mpi_operator.cache.transforms import strip_managed_fields
from mpi_operator.objects import KubeObject, resource_version, uid_of
from mpi_operator.runtime.handlers import mpijob_update_matters

DEFAULT_SIZE = 64


class ParsedJobs:
    def __init__(
        self,
        *,
        gpus_per_node: int,
        max_workers: int,
        cluster_domain: str = "",
        size: int = DEFAULT_SIZE,
    ) -> None:
        self._gpus_per_node = gpus_per_node
        self._max_workers = max_workers
        self._cluster_domain = cluster_domain
        self._size = size
        self._cache: OrderedDict[tuple[str, str | None, str], Normalized] = OrderedDict()

    def parse(self, key: str, raw: Mapping[str, Any], obj: Mapping[str, Any]) -> Normalized:
        """`parse_and_validate(obj)` for the stored object `raw` (`obj`: it with apiVersion and
        kind); raises `InvalidMPIJob` as that does (invalid versions are not kept)."""
        version = resource_version(raw)
        ident = (key, uid_of(raw), version)
        hit = self._cache.get(ident) if version else None
        if hit is not None:
            self._cache.move_to_end(ident)
            return hit
        parsed = parse_and_validate(
            obj,
            gpus_per_node=self._gpus_per_node,
            max_workers=self._max_workers,
            cluster_domain=self._cluster_domain,
        )
        if version:
            self._keep(ident, parsed)
        return parsed

    def written(self, key: str, before: Mapping[str, Any], after: KubeObject) -> None:
        """Keeps `after`, what a status write of the stored object `before` returned, as `before`'s
        parse with `after`'s metadata (less managedFields) and status, when nothing else differs
        (the API server changes nothing else on a status write) and `before` is kept. Else the next
        `parse` of `after` parses it whole."""
        uid, version = uid_of(before), resource_version(after)
        hit = self._cache.get((key, uid, resource_version(before)))
        if hit is None or not version or uid_of(after) != uid:
            return
        if mpijob_update_matters(before, after):
            return
        stored = after.get("status")
        try:
            status = None if stored is None else _parse_status(stored)
        except ValidationError:
            return  # what a full parse repairs and reports
        # As the informer will store it: the answer's managedFields would hold on to what no sync
        # reads (kilobytes per job).
        metadata = strip_managed_fields(after)["metadata"]
        job = hit.job.model_copy(update={"metadata": metadata, "status": status})
        self._keep((key, uid, version), dataclasses.replace(hit, job=job))

    def _keep(self, ident: tuple[str, str | None, str], parsed: Normalized) -> None:
        self._cache[ident] = parsed
        self._cache.move_to_end(ident)
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)

    def __len__(self) -> int:
        return len(self._cache)


def _parse_status(status: Any) -> MPIJobStatus:
    """As `normalize` parses the status of a whole job (by alias, no unknown fields)."""
    return MPIJobStatus.model_validate(status, by_alias=True, by_name=False, extra="forbid")
