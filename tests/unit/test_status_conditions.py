"""Conditions and events: upstream's updateMPIJobStatus and condition engine (TestLauncherSucceeded,
TestLauncherSucceededWithRunningPod, TestLauncherFailed, TestLauncherActiveWorkerReady,
TestMPIJobFailure, evictions), plus properties of the engine."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpi_operator import conditions, reasons, status
from mpi_operator.planning import Observed

from .planning.factory import (
    EARLIER,
    NOW,
    condition_summary,
    converged,
    launcher_job,
    launcher_pod,
    make_job,
    sync,
    with_status,
    worker,
    workers,
)

T0 = "2026-11-25T20:00:00Z"
T1 = "2026-11-25T21:00:00Z"
STAMP = "2026-11-25T22:00:00Z"  # NOW, as stored


def _with_timestamps(**extra: Any) -> dict[str, Any]:
    return {"startTime": EARLIER, "completionTime": EARLIER, **extra}


def test_launcher_succeeded() -> None:
    job = make_job(workers=64, status=_with_timestamps())
    launcher = launcher_job(job, condition="Complete")
    the_plan, update = sync(
        job, converged(job, worker_pods=[], launcher=launcher, launcher_pods=[])
    )
    assert the_plan.empty
    assert update.status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    assert condition_summary(update.status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Succeeded", "True", "MPIJobSucceeded"),
        ("Running", "False", "MPIJobRunning"),
    ]
    succeeded, running = update.status["conditions"][1:]
    assert succeeded["message"] == "MPIJob default/test successfully completed."
    assert (
        running["message"] == "MPIJob default/test is finished but Running condition was never set."
    )
    # Running's times are never after completionTime (#787).
    assert running["lastTransitionTime"] == running["lastUpdateTime"] == EARLIER
    assert update.status["completionTime"] == EARLIER
    assert [(e.type, e.reason) for e in update.events] == [
        ("Normal", "MPIJobCreated"),
        ("Normal", "MPIJobSucceeded"),
    ]
    assert update.counters == ("created", "succeeded")


def test_launcher_succeeded_with_running_pod() -> None:
    running_status = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "MPIJobCreated",
                "lastTransitionTime": T0,
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "MPIJobRunning",
                "message": "MPIJob default/test is running.",
                "lastUpdateTime": T0,
                "lastTransitionTime": T0,
            },
        ],
        "startTime": T0,
    }
    job = make_job(workers=2, status=running_status)
    launcher = launcher_job(job, condition="Complete", completion_time=T1)
    observed = converged(job, launcher=launcher, launcher_pods=[launcher_pod(launcher, "Running")])
    _, update = sync(job, observed)
    assert condition_summary(update.status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Running", "False", "MPIJobRunning"),
        ("Succeeded", "True", "MPIJobSucceeded"),
    ]
    running = update.status["conditions"][1]
    assert running["message"] == "MPIJob default/test is running."  # flipped, not rewritten
    assert running["lastTransitionTime"] == T0
    assert update.status["completionTime"] == T1  # copied from the launcher Job
    assert running["lastTransitionTime"] <= update.status["completionTime"]
    assert [e.reason for e in update.events] == ["MPIJobSucceeded"]


def test_launcher_failed() -> None:
    job = make_job(workers=64, status=_with_timestamps())
    launcher = launcher_job(
        job,
        condition="Failed",
        reason="BackoffLimitExceeded",
        message="Job has reached the specified backoff limit",
        failed=2,
    )
    pods = [
        launcher_pod(
            launcher,
            "Failed",
            reason="FailedReason1",
            message="first message",
            created=T0,
            suffix="a",
        ),
        launcher_pod(
            launcher,
            "Failed",
            reason="FailedReason2",
            message="second message",
            created=T1,
            suffix="b",
        ),
    ]
    _, update = sync(job, converged(job, worker_pods=[], launcher=launcher, launcher_pods=pods))
    assert update.status["replicaStatuses"] == {"Launcher": {"failed": 2}, "Worker": {}}
    assert condition_summary(update.status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Failed", "True", "BackoffLimitExceeded/FailedReason2"),
        ("Running", "False", "MPIJobRunning"),
    ]
    assert (
        update.status["conditions"][1]["message"]
        == "Job has reached the specified backoff limit: second message"
    )
    assert ("Warning", "BackoffLimitExceeded/FailedReason2") in [
        (e.type, e.reason) for e in update.events
    ]
    assert update.counters == ("created", "failed")


@pytest.mark.parametrize(
    ("reason", "message", "expected"),
    [
        (
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            ("DeadlineExceeded", None),
        ),
        ("", "", ("MPIJobFailed", "MPIJob default/test has failed")),
        (
            "BackoffLimitExceeded",
            "limit",
            ("BackoffLimitExceeded", "limit"),
        ),  # no failed pod cached
    ],
    ids=["deadline", "defaults", "backoff-without-pods"],
)
def test_launcher_failed_reasons(
    reason: str, message: str, expected: tuple[str, str | None]
) -> None:
    job = make_job(workers=1)
    launcher = launcher_job(job, condition="Failed", reason=reason, message=message, failed=1)
    _, update = sync(job, converged(job, launcher=launcher, launcher_pods=[]))
    failed = next(c for c in update.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == expected[0]
    assert failed["message"] == (expected[1] or message)
    assert update.status["completionTime"] == STAMP  # failure: now


def test_failure_message_is_truncated() -> None:
    job = make_job(workers=1)
    launcher = launcher_job(job, condition="Failed", reason="BackoffLimitExceeded", message="m")
    pod = launcher_pod(launcher, "Failed", reason="Error", message="x" * 2000)
    _, update = sync(job, converged(job, launcher=launcher, launcher_pods=[pod]))
    message = next(c for c in update.status["conditions"] if c["type"] == "Failed")["message"]
    assert len(message) == 1024
    assert message.endswith("...")


@pytest.mark.parametrize(
    ("length", "expected_length", "suffix"),
    [(1023, 1023, "a"), (1024, 1024, "a"), (1025, 1024, "..."), (5000, 1024, "...")],
)
def test_truncate_message(length: int, expected_length: int, suffix: str) -> None:
    out = reasons.truncate_message("a" * length)
    assert len(out) == expected_length
    assert out.endswith(suffix)


def test_truncate_message_counts_bytes_and_never_splits_a_character() -> None:
    # The API's limit is in bytes: 1000 three-byte characters are 3000 bytes, not 1000 characters.
    out = reasons.truncate_message("€" * 1000)
    assert len(out.encode()) <= reasons.MESSAGE_LIMIT
    assert out == "€" * 340 + "..."
    assert reasons.truncate_message("€" * 341) == "€" * 341  # 1023 bytes fit


def test_launcher_active_worker_ready() -> None:
    job = make_job(workers=8, status=_with_timestamps())
    observed = converged(job)
    _, update = sync(job, observed)
    assert ("Running", "True", "MPIJobRunning") in condition_summary(update.status)
    running = next(c for c in update.status["conditions"] if c["type"] == "Running")
    assert running["message"] == "MPIJob default/test is running."
    assert update.status["replicaStatuses"]["Worker"]["active"] == 8
    assert ("Normal", "MPIJobRunning", "MPIJob default/test is running") in [
        (e.type, e.reason, e.message) for e in update.events
    ]
    # The next sync sees the same world: nothing to write, no repeated event.
    again = sync(with_status(job, update.status), observed, now=NOW + timedelta(minutes=5))[1]
    assert not again.changed
    assert again.events == ()


def test_mpi_job_failure_launcher_pod_failed_but_job_retrying() -> None:
    """TestMPIJobFailure: a failed launcher pod while the Job retries -> counts only, no Failed
    condition."""
    job = make_job(workers=2)
    launcher = launcher_job(job, failed=1)
    observed = converged(
        job, launcher=launcher, launcher_pods=[launcher_pod(launcher, "Failed", reason="Error")]
    )
    _, update = sync(job, observed)
    assert update.status["replicaStatuses"]["Launcher"] == {"failed": 1}
    assert update.status["replicaStatuses"]["Worker"]["active"] == 2
    assert "Failed" not in [c["type"] for c in update.status["conditions"]]
    assert "Running" not in [
        c["type"] for c in update.status["conditions"]
    ]  # no launcher pod Running


def test_evicted_workers() -> None:
    """A Failed/Evicted worker fails the job without completionTime; a later launcher outcome
    wins."""
    job = make_job(workers=2)
    pods = [worker(job, 0), worker(job, 1, "Failed", reason="Evicted")]
    observed = converged(job, worker_pods=pods)
    _, update = sync(job, observed)
    failed = next(c for c in update.status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "MPIJobEvicted",
        "1/2 workers are evicted",
    )
    assert "completionTime" not in update.status
    assert ("Warning", "MPIJobEvicted", "1/2 workers are evicted") in [
        (e.type, e.reason, e.message) for e in update.events
    ]
    assert update.status["replicaStatuses"]["Worker"] == {
        "active": 1,
        "failed": 1,
        "ready": 1,
        "selector": status.worker_selector(job),
    }
    job = with_status(job, update.status)
    # Same eviction next sync: no new event, no write.
    assert not sync(job, observed)[1].changed

    succeeded = converged(
        job, worker_pods=pods, launcher=launcher_job(job, condition="Complete", completion_time=T1)
    )
    _, update = sync(job, succeeded)
    summary = condition_summary(update.status)
    assert ("Failed", "False", "MPIJobEvicted") in summary
    assert ("Succeeded", "True", "MPIJobSucceeded") in summary

    failed_launcher = launcher_job(
        job, condition="Failed", reason="BackoffLimitExceeded", message="limit"
    )
    _, update = sync(
        job, converged(job, worker_pods=pods, launcher=failed_launcher, launcher_pods=[])
    )
    assert ("Failed", "True", "BackoffLimitExceeded") in condition_summary(update.status)
    assert update.status["completionTime"] == STAMP


# --- the condition engine -----------------------------------------------------------------------


def _conds(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "conditions": [
            {
                "type": t,
                "status": s,
                "reason": r,
                "message": "old",
                "lastUpdateTime": T0,
                "lastTransitionTime": T0,
            }
            for t, s, r in items
        ]
    }


@pytest.mark.parametrize(
    ("before", "set_to", "changed", "after"),
    [
        ([("Running", "True", "A")], ("Running", "True", "A"), False, [("Running", "True", "A")]),
        ([("Running", "True", "A")], ("Running", "True", "B"), True, [("Running", "True", "B")]),
        ([("Running", "True", "A")], ("Running", "False", "A"), True, [("Running", "False", "A")]),
        (
            [("Running", "True", "A"), ("Created", "True", "C")],
            ("Running", "True", "B"),
            True,
            [("Created", "True", "C"), ("Running", "True", "B")],
        ),
        ([("Restarting", "True", "R")], ("Running", "True", "A"), True, [("Running", "True", "A")]),
        (
            [("Running", "True", "A")],
            ("Restarting", "True", "R"),
            True,
            [("Restarting", "True", "R")],
        ),
        (
            [("Running", "True", "A")],
            ("Failed", "True", "F"),
            True,
            [("Running", "False", "A"), ("Failed", "True", "F")],
        ),
        (
            [("Failed", "True", "F"), ("Running", "True", "A")],
            ("Succeeded", "True", "S"),
            True,
            [("Failed", "False", "F"), ("Running", "False", "A"), ("Succeeded", "True", "S")],
        ),
        (
            [("Suspended", "True", "X"), ("Created", "True", "C")],
            ("Failed", "True", "F"),
            True,
            [("Suspended", "True", "X"), ("Created", "True", "C"), ("Failed", "True", "F")],
        ),
    ],
    ids=[
        "same-status-and-reason-noop",
        "reason-change",
        "status-change",
        "moves-to-end",
        "running-drops-restarting",
        "restarting-drops-running",
        "failed-flips-running",
        "succeeded-flips-failed-and-running",
        "others-untouched",
    ],
)
def test_set_condition(
    before: list[tuple[str, str, str]],
    set_to: tuple[str, str, str],
    changed: bool,
    after: list[tuple[str, str, str]],
) -> None:
    st_ = _conds(*before)
    kind, value, reason = set_to
    assert conditions.set_condition(st_, kind, value, reason, "new", STAMP) is changed  # type: ignore[arg-type]
    assert condition_summary(st_) == after
    new = next(c for c in st_["conditions"] if c["type"] == kind)
    if not changed:
        assert new["message"] == "old"  # a message change alone is ignored
        return
    assert new["lastUpdateTime"] == STAMP
    old_status = next((s for t, s, _ in before if t == kind), None)
    assert new["lastTransitionTime"] == (T0 if old_status == value else STAMP)
    # Flipped conditions keep reason, message and times.
    for cond in st_["conditions"]:
        if cond["type"] != kind:
            assert (cond["message"], cond["lastTransitionTime"]) == ("old", T0)


def test_restarting_is_never_set() -> None:
    job = make_job(workers=2)
    for observed in (
        Observed(),
        converged(job),
        converged(job, worker_pods=workers(job, 2, "Failed")),
    ):
        assert "Restarting" not in [
            c["type"] for c in sync(job, observed)[1].status.get("conditions", [])
        ]


_PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "", None])


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[Any, Observed]:
    replicas = draw(st.integers(0, 3))
    stored = draw(
        st.lists(
            st.tuples(
                st.sampled_from(
                    ["Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"]
                ),
                st.sampled_from(["True", "False", "Unknown"]),
                st.sampled_from(["", "MPIJobRunning", "X"]),
            ),
            max_size=6,
            unique_by=lambda t: t[0],
        )
    )
    job_status: dict[str, Any] = _conds(*stored)
    if draw(st.booleans()):
        job_status["completionTime"] = EARLIER
    job = make_job(workers=replicas, runPolicy={"suspend": draw(st.booleans())}, status=job_status)
    pods = []
    for index in range(draw(st.integers(0, 4))):
        pod = worker(make_job(workers=4), index)
        pod["status"] = {
            "phase": draw(_PHASES),
            "reason": draw(st.sampled_from([None, "Evicted", "Error"])),
            "conditions": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(["Ready", "PodScheduled"]),
                            "status": st.sampled_from(["True", "False"]),
                        }
                    ),
                    max_size=2,
                )
            ),
        }
        pods.append(pod)
    launcher = None
    if draw(st.booleans()):
        launcher = launcher_job(
            job,
            condition=draw(st.sampled_from([None, "Complete", "Failed", "Suspended"])),
            reason=draw(st.sampled_from(["", "BackoffLimitExceeded"])),
            failed=draw(st.integers(0, 3)),
        )
    lpods = (
        [launcher_pod(launcher, draw(_PHASES) or "Pending")]
        if launcher and draw(st.booleans())
        else []
    )
    return job, Observed(launcher_job=launcher, launcher_pods=tuple(lpods), worker_pods=tuple(pods))


@settings(max_examples=200, deadline=None)
@given(_worlds())
def test_compute_status_is_total_and_settles(world: tuple[Any, Observed]) -> None:
    """Never raises on any mix of phases and conditions; at most one condition per type; applying
    the computed status and computing again changes nothing and records nothing."""
    job, observed = world
    update = status.compute_status(job, observed, now=NOW)
    types = [c["type"] for c in update.status.get("conditions", [])]
    assert len(types) == len(set(types))
    stored = with_status(job, copy.deepcopy(update.status))
    again = status.compute_status(stored, observed, now=NOW + timedelta(seconds=30))
    assert not again.changed, (update.status, again.status)
    assert again.events == ()
