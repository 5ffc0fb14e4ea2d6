"""desired.podtemplate's copy of a template: equal to `copy.deepcopy`, sharing no dict or list with
it; the job's PriorityClass on the pods whose template names none."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.desired.launcher import build_launcher_job
from mpi_operator.desired.podtemplate import _json_copy
from mpi_operator.desired.workers import build_worker

from .factory import container, make_job, template

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


def containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for item in value.values() for c in containers(item))]
    if isinstance(value, list):
        return [value, *(c for item in value for c in containers(item))]
    return []


@given(JSON)
def test_a_json_copy_is_a_deep_copy(value: Any) -> None:
    copied = _json_copy(value)
    assert copied == copy.deepcopy(value)
    shared = {id(c) for c in containers(value)} & {id(c) for c in containers(copied)}
    assert not shared


def test_what_is_not_json_is_deep_copied() -> None:
    inner = {"a": [1]}
    value = {"when": dt.datetime(2030, 1, 1, tzinfo=dt.UTC), "pair": (inner, 2)}
    copied = _json_copy(value)
    assert copied == value
    assert copied["pair"][0] is not inner


@pytest.mark.parametrize(
    ("policy", "own", "want"),
    [("high", None, "high"), ("high", "low", "low"), (None, None, None), (None, "low", "low")],
    ids=["from-policy", "template-wins", "none", "template-only"],
)
def test_priority_class_reaches_pods_that_name_none(
    policy: str | None, own: str | None, want: str | None
) -> None:
    extra = {"priorityClassName": own} if own else {}
    job = make_job(
        worker_template=template(container(), **extra),
        launcher_template=template(container(), **extra),
        runPolicy={"schedulingPolicy": {"priorityClass": policy}} if policy else {},
    )
    worker = build_worker(job, 0)
    launcher = build_launcher_job(job)["spec"]["template"]
    assert worker["spec"].get("priorityClassName") == want
    assert launcher["spec"].get("priorityClassName") == want
