"""The latest version of each MPIJob parsed, so the syncs of one version do not parse it again.

Pydantic's parse and the cross-field validation of a spec are a large part of a sync. A job whose
pods change while its own object does not (a starting job, a running elastic job's churn) is synced
again and again at one version; those syncs parse it once. A status write gives the job a new
version that differs only in its status: the reconciler hands over what the write returned
(`written`), and only that status is parsed. Any other change to an object (uid and resourceVersion
identify it) is parsed anew. One version is kept per job, forgotten with the job (`forget`): as
many as the MPIJob cache holds, so every job of a fan-in keeps its parse between its syncs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import ValidationError

from mpi_operator.api import parse_and_validate
from mpi_operator.api.models import MPIJobStatus
from mpi_operator.api.normalize import Normalized
from mpi_operator.objects import resource_version, uid_of
from mpi_operator.runtime.handlers import mpijob_update_matters


class _Parsed(NamedTuple):
    uid: str | None
    version: str
    parsed: Normalized


class ParsedJobs:
    def __init__(self, *, gpus_per_node: int, max_workers: int, cluster_domain: str = "") -> None:
        self._gpus_per_node = gpus_per_node
        self._max_workers = max_workers
        self._cluster_domain = cluster_domain
        self._cache: dict[str, _Parsed] = {}

    def parse(self, key: str, raw: Mapping[str, Any], obj: Mapping[str, Any]) -> Normalized:
        """`parse_and_validate(obj)` for the stored object `raw` (`obj`: it with apiVersion and
        kind); raises `InvalidMPIJob` as that does (an invalid version is not kept)."""
        uid, version = uid_of(raw), resource_version(raw)
        hit = self._cache.get(key)
        if hit is not None and version and hit.uid == uid and hit.version == version:
            return hit.parsed
        self._cache.pop(key, None)
        parsed = parse_and_validate(
            obj,
            gpus_per_node=self._gpus_per_node,
            max_workers=self._max_workers,
            cluster_domain=self._cluster_domain,
        )
        if version:
            self._cache[key] = _Parsed(uid, version, parsed)
        return parsed

    def written(self, key: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Keeps `after`, what a status write of the stored object `before` returned, as `before`'s
        parse with `after`'s metadata and status, when nothing else differs (the API server changes
        nothing else on a status write) and `before` is the version kept. Else the next `parse` of
        `after` parses it whole."""
        hit, uid, version = self._cache.get(key), uid_of(before), resource_version(after)
        if hit is None or hit.uid != uid or hit.version != resource_version(before):
            return
        if not version or uid_of(after) != uid or mpijob_update_matters(before, after):
            return
        stored = after.get("status")
        try:
            status = None if stored is None else _parse_status(stored)
        except ValidationError:
            return  # what a full parse repairs and reports
        job = hit.parsed.job.model_copy(
            update={"metadata": dict(after["metadata"]), "status": status}
        )
        self._cache[key] = _Parsed(uid, version, dataclasses.replace(hit.parsed, job=job))

    def forget(self, key: str) -> None:
        """The job left the cache: its parse goes too."""
        self._cache.pop(key, None)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache


def _parse_status(status: Any) -> MPIJobStatus:
    """As `normalize` parses the status of a whole job (by alias, no unknown fields)."""
    return MPIJobStatus.model_validate(status, by_alias=True, by_name=False, extra="forbid")
