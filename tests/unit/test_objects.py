"""mpi_operator.objects: reading plain-JSON objects defensively (readiness, ownership, Job state,
times)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mpi_operator import objects


def pod(
    phase: Any = "Running", ready: Any = "True", *, deleting: bool = False, conditions: Any = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "w-0", "namespace": "ns"},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
    }
    if conditions is not None:
        obj["status"]["conditions"] = conditions
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        (pod(), True),
        (pod(ready="False"), False),
        (pod(ready="Unknown"), False),
        (pod(phase="Pending"), False),
        (pod(phase="Failed"), False),  # a Ready condition left over from before the failure
        (pod(phase="Succeeded"), False),
        (pod(deleting=True), False),
        (pod(conditions=[{"type": "ContainersReady", "status": "True"}]), False),
        (pod(conditions="Ready"), False),
        ({"status": None}, False),
        ({}, False),
    ],
    ids=[
        "running-ready",
        "not-ready",
        "unknown",
        "pending",
        "failed-with-stale-ready",
        "succeeded",
        "terminating",
        "other-condition",
        "malformed-conditions",
        "null-status",
        "empty",
    ],
)
def test_pod_ready_means_running_ready_and_not_being_deleted(
    obj: dict[str, Any], ready: bool
) -> None:
    assert objects.is_pod_ready(obj) is ready


@pytest.mark.parametrize(
    ("conditions", "since"),
    [
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-28T10:00:05Z"}],
            datetime(2026, 11, 28, 10, 0, 5, tzinfo=UTC),
        ),
        (
            [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-28T10:00:05Z"}],
            None,
        ),
        ([{"type": "Ready", "status": "True"}], None),
        ([{"type": "Ready", "status": "True", "lastTransitionTime": "soon"}], None),
        ("Ready", None),
    ],
    ids=["ready", "not-ready", "no-time", "junk-time", "malformed-conditions"],
)
def test_pod_ready_since_is_the_ready_condition_time(conditions: Any, since: Any) -> None:
    assert objects.pod_ready_since(pod(conditions=conditions)) == since


def test_terminating_is_a_deletion_timestamp() -> None:
    assert objects.is_terminating(pod(deleting=True))
    assert not objects.is_terminating(pod())
    assert not objects.is_terminating({"metadata": "junk"})


@pytest.mark.parametrize(
    ("refs", "controller_uid"),
    [
        (None, None),
        ([], None),
        ([{"uid": "u1", "controller": False}], None),
        ([{"uid": "u1", "controller": "true"}], None),
        ([{"uid": "u1"}, {"uid": "u2", "controller": True}], "u2"),
        (["junk", {"uid": "u3", "controller": True}], "u3"),
        ([{"controller": True}], None),
    ],
    ids=[
        "none",
        "empty",
        "owner-not-controller",
        "string-true",
        "among-owners",
        "junk-ref",
        "no-uid",
    ],
)
def test_controller_is_the_owner_marked_controller(refs: Any, controller_uid: str | None) -> None:
    obj = {"metadata": {"ownerReferences": refs}}
    assert objects.controller_uid(obj) == controller_uid
    assert objects.is_controlled_by(obj, "u2") is (controller_uid == "u2")


def test_controlled_by_an_owner_without_uid_compares_as_given() -> None:
    """Objects built for a job that has no uid yet (dry runs, unit tests) still belong to it."""
    obj = {"metadata": {"ownerReferences": [{"uid": "", "controller": True}]}}
    assert objects.is_controlled_by(obj, "")
    assert not objects.is_controlled_by(obj, "u1")
    assert objects.controller_uid(obj) is None


def test_metadata_accessors_default_when_absent() -> None:
    full = {"metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7"}}
    assert (objects.name_of(full), objects.namespace_of(full), objects.uid_of(full)) == (
        "a",
        "ns",
        "u",
    )
    assert objects.resource_version(full) == "7"
    for empty in ({}, {"metadata": None}, {"metadata": {"uid": ""}}):
        assert (objects.name_of(empty), objects.namespace_of(empty), objects.uid_of(empty)) == (
            "",
            "",
            None,
        )
        assert objects.resource_version(empty) == ""


@pytest.mark.parametrize(
    ("conditions", "succeeded", "failed"),
    [
        ([], False, False),
        ([{"type": "Complete", "status": "True"}], True, False),
        ([{"type": "Failed", "status": "True"}], False, True),
        (
            [{"type": "Failed", "status": "False"}, {"type": "Suspended", "status": "True"}],
            False,
            False,
        ),
    ],
    ids=["running", "complete", "failed", "not-finished"],
)
def test_batch_job_finished(
    conditions: list[dict[str, str]], succeeded: bool, failed: bool
) -> None:
    job = {"status": {"conditions": conditions}}
    assert objects.is_job_succeeded(job) is succeeded
    assert objects.is_job_failed(job) is failed
    assert objects.is_job_finished(job) is (succeeded or failed)


def test_batch_job_suspended_only_when_spec_says_true() -> None:
    assert objects.is_job_suspended({"spec": {"suspend": True}})
    assert not objects.is_job_suspended({"spec": {"suspend": "true"}})
    assert not objects.is_job_suspended({})


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05+00:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("yesterday", None),
        ("", None),
        (None, None),
        (12, None),
    ],
    ids=["zulu", "offset", "junk", "empty", "none", "number"],
)
def test_parse_time(value: Any, parsed: datetime | None) -> None:
    assert objects.parse_time(value) == parsed


def test_status_fields() -> None:
    failed = {"status": {"phase": "Failed", "reason": "Evicted", "failed": 2}}
    assert objects.pod_phase(failed) == "Failed"
    assert objects.pod_status_field(failed, "reason") == "Evicted"
    assert objects.pod_status_field(failed, "failed") == ""  # not a string
    assert objects.status_field(failed, "failed") == 2
    assert objects.pod_phase({}) == ""
