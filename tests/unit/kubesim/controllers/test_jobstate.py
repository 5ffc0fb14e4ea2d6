"""Pure parts of the simulated Job controller: defaults, pod accounting, wanted pods, conditions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.controllers import jobstate as js


def job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
            **spec,
        },
    }


def pod(
    phase: str = "Running", *, deleting: bool = False, restarts: int = 0, ready: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "finalizers": [js.TRACKING_FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, (1, 1, 6, False)),
        ({"parallelism": 4}, (4, None, 6, False)),
        ({"completions": 3, "backoffLimit": 0}, (1, 3, 0, False)),
        ({"podReplacementPolicy": "Failed"}, (1, 1, 6, True)),
        ({"podFailurePolicy": {"rules": []}}, (1, 1, 6, True)),
    ],
    ids=[
        "defaults",
        "work-queue",
        "completions",
        "replace-failed",
        "failure-policy-implies-failed",
    ],
)
def test_spec_defaults(spec: dict[str, Any], expected: tuple[Any, ...]) -> None:
    s = js.JobSpec.of(job(**spec))
    assert (s.parallelism, s.completions, s.backoff_limit, s.only_replace_failed) == expected


@pytest.mark.parametrize(
    ("managed_by", "expected"),
    [(None, True), ("kubernetes.io/job-controller", True), ("kueue.x-k8s.io/multikueue", False)],
    ids=["unset", "job-controller", "other"],
)
def test_managed_by(managed_by: str | None, expected: bool) -> None:
    spec = {} if managed_by is None else {"managedBy": managed_by}
    assert js.JobSpec.of(job(**spec)).managed_here is expected


@pytest.mark.parametrize(
    ("p", "replace_failed", "active", "terminating", "failed"),
    [
        (pod("Running"), False, True, False, False),
        (pod("Pending"), False, True, False, False),
        (pod("Failed"), False, False, False, True),
        (pod("Succeeded"), False, False, False, False),
        (pod("Running", deleting=True), False, False, True, True),
        (pod("Running", deleting=True), True, False, True, False),
        (pod("Failed", deleting=True), True, False, False, True),
        (pod("Succeeded", deleting=True), False, False, False, False),
    ],
    ids=[
        "running",
        "pending",
        "failed",
        "succeeded",
        "terminating-counts-failed",
        "terminating-not-failed-with-policy-failed",
        "failed-and-deleted",
        "succeeded-and-deleted",
    ],
)
def test_pod_classification(
    p: dict[str, Any], replace_failed: bool, active: bool, terminating: bool, failed: bool
) -> None:
    spec = js.JobSpec.of(
        job(podReplacementPolicy="Failed" if replace_failed else "TerminatingOrFailed")
    )
    assert js.is_active(p) is active
    assert js.is_terminating(p) is terminating
    assert js.is_pod_failed(p, spec) is failed


@pytest.mark.parametrize(
    ("policy", "limit", "restarts", "expected"),
    [
        ("OnFailure", 2, [1], False),
        ("OnFailure", 2, [1, 1], True),
        ("OnFailure", 0, [1], True),
        ("OnFailure", 0, [0], False),
        ("Never", 0, [5], False),
    ],
    ids=["below", "reached", "zero-limit-any-restart", "zero-limit-none", "never-ignores-restarts"],
)
def test_restarts_exceed_backoff(
    policy: str, limit: int, restarts: list[int], expected: bool
) -> None:
    j = job(backoffLimit=limit)
    j["spec"]["template"]["spec"]["restartPolicy"] = policy
    assert (
        js.restarts_exceed_backoff(js.JobSpec.of(j), [pod(restarts=r) for r in restarts])
        is expected
    )


@pytest.mark.parametrize(
    ("spec", "succeeded", "active", "wanted", "done"),
    [
        ({"completions": 5, "parallelism": 2}, 0, 0, 2, False),
        ({"completions": 5, "parallelism": 2}, 4, 1, 1, False),
        ({"completions": 5, "parallelism": 2}, 5, 0, 0, True),
        ({"parallelism": 3}, 0, 3, 3, False),
        ({"parallelism": 3}, 1, 2, 2, False),
        ({"parallelism": 3}, 1, 0, 0, True),
    ],
    ids=[
        "start",
        "last-one",
        "complete",
        "work-queue-start",
        "work-queue-draining",
        "work-queue-done",
    ],
)
def test_wanted_active_and_success(
    spec: dict[str, Any], succeeded: int, active: int, wanted: int, done: bool
) -> None:
    s = js.JobSpec.of(job(**spec))
    assert js.wanted_active(s, succeeded, active) == wanted
    assert js.success_criteria_met(s, succeeded, active) is done


@given(st.integers(0, 40))
def test_backoff_doubles_and_is_capped(failures: int) -> None:
    delay = js.backoff_seconds(10.0, failures)
    assert 0.0 <= delay <= js.MAX_BACKOFF_SECONDS
    if 1 <= failures < 6:
        assert delay == 10.0 * 2 ** (failures - 1)
    assert js.backoff_seconds(10.0, failures + 1) >= delay


def test_set_condition_moves_transition_time_only_on_flip() -> None:
    first = js.set_condition([], "Suspended", True, "JobSuspended", "Job suspended", "t1")
    same = js.set_condition(first, "Suspended", True, "JobSuspended", "Job suspended", "t2")
    assert same == first
    flipped = js.set_condition(same, "Suspended", False, "JobResumed", "Job resumed", "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"
    assert flipped[0]["status"] == "False"
    assert js.finished({"conditions": flipped}) is None


def test_new_pod_from_template() -> None:
    j = job()
    j["spec"]["template"]["metadata"] = {
        "labels": {"app": "x"},
        "annotations": {"kubesim/run-seconds": "1"},
    }
    p = js.new_pod(j)
    assert p["metadata"]["generateName"] == "train-"
    assert p["metadata"]["labels"][js.CONTROLLER_UID_LABEL] == "u-1"
    assert p["metadata"]["labels"]["app"] == "x"
    assert p["metadata"]["annotations"] == {"kubesim/run-seconds": "1"}
    assert js.controller_uid(p) == ("train", "u-1")
    p["spec"]["containers"].append({"name": "extra"})
    assert len(j["spec"]["template"]["spec"]["containers"]) == 1
