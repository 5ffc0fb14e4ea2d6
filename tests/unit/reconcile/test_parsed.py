"""`reconcile.parsed.ParsedJobs`: one parse per MPIJob version (uid + resourceVersion), a new one
for any change but the status a status write answered with, invalid versions never kept, and at
most `size` versions held."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.api import InvalidMPIJob, parse_and_validate
from mpi_operator.api.normalize import Normalized, to_canonical_dict
from mpi_operator.cache.transforms import strip_managed_fields
from mpi_operator.reconcile import parsed as parsed_module
from mpi_operator.reconcile.parsed import ParsedJobs

from ..api.test_properties import SEEDS, SETTINGS, canonical_jobs, statuses
from ..planning.factory import make_job


def _parses(manifest: Any) -> bool:
    try:
        parse_and_validate(copy.deepcopy(manifest), gpus_per_node=1, max_workers=1000)
    except InvalidMPIJob:
        return False
    return True


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


# ---- a status write's answer: only its status is parsed


def _answer(before: dict[str, Any], status: Any, rv: str = "2") -> dict[str, Any]:
    """What the API returns for a status write of `before`: a new version, the given status."""
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = rv
    after["metadata"]["managedFields"] = [{"manager": "mpi-operator", "subresource": "status"}]
    after["status"] = status
    return after


def _stored(manifest: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    obj = copy.deepcopy(manifest)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("name", "test")
    meta |= {"namespace": meta.get("namespace", "default"), "uid": "u1", "resourceVersion": rv}
    return obj


def _full_parses(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The objects `ParsedJobs` hands to `parse_and_validate` from now on."""
    calls: list[Any] = []
    real = parsed_module.parse_and_validate

    def counted(obj: Any, **kwargs: Any) -> Normalized:
        calls.append(obj)
        return real(obj, **kwargs)

    monkeypatch.setattr(parsed_module, "parse_and_validate", counted)
    return calls


@SETTINGS
@given(
    manifest=canonical_jobs().filter(_parses) | st.sampled_from([s for s in SEEDS if _parses(s)]),
    status=statuses,
)
def test_a_status_write_answer_is_kept_as_a_whole_parse_of_it_would_be(
    manifest: dict[str, Any], status: dict[str, Any]
) -> None:
    before = _stored(manifest)
    after = _answer(before, status)
    cache = parsed()
    cache.parse("default/test", before, before)
    cache.written("default/test", before, after)
    assert len(cache) == 2
    kept = cache.parse("default/test", after, after)
    stored = strip_managed_fields(after)  # as the informer keeps the answer's version
    assert kept == parse_and_validate(stored, gpus_per_node=1, max_workers=1000)
    assert "managedFields" not in kept.job.metadata


def test_the_kept_answer_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = parsed()
    before = raw()
    cache.parse("default/test", before, before)
    full = _full_parses(monkeypatch)
    after = _answer(before, {"conditions": [{"type": "Created", "status": "True"}]})
    cache.written("default/test", before, after)
    kept = cache.parse("default/test", after, after)
    assert full == []
    assert kept.job.status is not None
    assert [cond.type for cond in kept.job.status.conditions] == ["Created"]
    assert kept.job.metadata["resourceVersion"] == "2"


def _spec_changed(obj: dict[str, Any]) -> None:
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3


def _label_added(obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"] = {"team": "a"}


def _uid_changed(obj: dict[str, Any]) -> None:
    obj["metadata"]["uid"] = "u2"


def _status_unknown_field(obj: dict[str, Any]) -> None:
    obj["status"]["notAField"] = 1


@pytest.mark.parametrize(
    "change",
    [_spec_changed, _label_added, _uid_changed, _status_unknown_field],
    ids=["spec", "labels", "uid", "a status field the schema lacks"],
)
def test_an_answer_that_differs_elsewhere_is_parsed_whole(
    change: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = parsed()
    before = raw()
    cache.parse("default/test", before, before)
    after = _answer(before, {"conditions": []})
    change(after)
    cache.written("default/test", before, after)
    full = _full_parses(monkeypatch)
    result = cache.parse("default/test", after, after)
    assert full == [after]
    assert result == parse_and_validate(copy.deepcopy(after), gpus_per_node=1, max_workers=1000)


def test_an_answer_to_a_version_not_kept_is_left_to_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = parsed()
    before = raw()
    after = _answer(before, {"conditions": []})
    cache.written("default/test", before, after)
    assert len(cache) == 0
    full = _full_parses(monkeypatch)
    cache.parse("default/test", after, after)
    assert full == [after]
