"""`reconcile.parsed.ParsedJobs`: one parse per MPIJob version (uid + resourceVersion), a new one
for any change, invalid versions never kept, and at most `size` versions held."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api import InvalidMPIJob
from mpi_operator.api.normalize import to_canonical_dict
from mpi_operator.reconcile.parsed import ParsedJobs

from ..planning.factory import make_job


def raw(name: str = "test", rv: str = "1", uid: str = "u1", workers: int = 2) -> dict[str, Any]:
    obj = to_canonical_dict(make_job(name=name, workers=workers))
    obj["metadata"] = {**obj["metadata"], "resourceVersion": rv, "uid": uid}
    return obj


def parsed(size: int = 4) -> ParsedJobs:
    return ParsedJobs(gpus_per_node=1, max_workers=1000, size=size)


def test_one_version_is_parsed_once() -> None:
    cache = parsed()
    first = cache.parse("default/test", raw(), raw())
    assert cache.parse("default/test", raw(), raw()) is first
    assert first.job.worker is not None
    assert first.job.worker.replicas == 2


@pytest.mark.parametrize(
    "changed",
    [{"rv": "2"}, {"uid": "u2"}, {"name": "other"}],
    ids=["new version", "new uid", "other job"],
)
def test_any_other_version_is_parsed_anew(changed: dict[str, str]) -> None:
    cache = parsed()
    first = cache.parse("default/test", raw(), raw())
    other = raw(**changed)
    key = f"default/{other['metadata']['name']}"
    assert cache.parse(key, other, other) is not first


def test_an_invalid_version_raises_every_time() -> None:
    cache = parsed()
    bad = raw(workers=2)
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = -1
    for _ in range(2):
        with pytest.raises(InvalidMPIJob):
            cache.parse("default/test", bad, bad)
    assert len(cache) == 0


def test_at_most_size_versions_are_kept() -> None:
    cache = parsed(size=2)
    results = [cache.parse("default/test", raw(rv=str(i)), raw(rv=str(i))) for i in range(3)]
    assert len(cache) == 2
    assert cache.parse("default/test", raw(rv="2"), raw(rv="2")) is results[2]
    assert cache.parse("default/test", raw(rv="0"), raw(rv="0")) is not results[0]  # evicted
