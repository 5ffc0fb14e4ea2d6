"""replicaStatuses, startTime, observedGeneration and the write decision
(TestLauncherActiveWorkerNotReady, TestMPIJobWaitWorkers, TestMPIJobSuccess's counts; our `ready`
and `selector`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from mpi_operator import status
from mpi_operator.planning import Observed

from .planning.factory import (
    EARLIER,
    NOW,
    converged,
    launcher_job,
    launcher_pod,
    make_job,
    sync,
    with_spec,
    with_status,
    worker,
    workers,
)

SELECTOR = (
    "training.kubeflow.org/job-name=test,training.kubeflow.org/job-role=worker,"
    "training.kubeflow.org/operator-name=mpi-operator"
)


def test_launcher_active_worker_not_ready() -> None:
    job = make_job(workers=8, status={"startTime": EARLIER, "completionTime": EARLIER})
    observed = converged(job, worker_pods=workers(job, 8, "Pending"))
    _, update = sync(job, observed)
    assert update.status["replicaStatuses"] == {
        "Launcher": {"active": 1},
        "Worker": {"selector": SELECTOR},
    }
    assert [c["type"] for c in update.status["conditions"]] == ["Created"]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ([("Running", True), ("Running", False)], {"active": 2, "ready": 1}),
        (
            [("Succeeded", False), ("Failed", False), ("Pending", False)],
            {"succeeded": 1, "failed": 1},
        ),
        ([("Unknown", False), ("Running", True)], {"active": 1, "ready": 1}),
    ],
    ids=["running-ready", "finished-pending", "unknown"],
)
def test_worker_counts(pods: list[tuple[str, bool]], expected: dict[str, int]) -> None:
    job = make_job(workers=len(pods))
    observed = converged(
        job, worker_pods=[worker(job, i, phase, ready=r) for i, (phase, r) in enumerate(pods)]
    )
    _, update = sync(job, observed)
    assert update.status["replicaStatuses"]["Worker"] == {**expected, "selector": SELECTOR}


def test_only_own_workers_below_the_count_are_counted() -> None:
    job = make_job(workers=2)
    bigger = make_job(workers=4)
    pods = [
        *workers(job, 2),
        worker(bigger, 2),  # scaled away, still running
        worker(bigger, 3, owner_uid="another-job"),
    ]
    _, update = sync(job, converged(job, worker_pods=pods))
    assert update.status["replicaStatuses"]["Worker"] == {
        "active": 2,
        "ready": 2,
        "selector": SELECTOR,
    }


def test_terminating_worker_is_active_but_not_ready() -> None:
    job = make_job(workers=2)
    pods = [worker(job, 0), worker(job, 1, terminating=True)]
    _, update = sync(job, converged(job, worker_pods=pods))
    assert update.status["replicaStatuses"]["Worker"] == {
        "active": 2,
        "ready": 1,
        "selector": SELECTOR,
    }


def test_launcher_key_absent_until_the_job_exists() -> None:
    """TestMPIJobWaitWorkers: `{Worker: ...}` only, while the launcher waits for workers."""
    job = make_job(workers=2)
    _, update = sync(job, Observed(worker_pods=tuple(workers(job, 2, "Pending"))))
    assert set(update.status["replicaStatuses"]) == {"Worker"}


def test_launcher_pods_of_other_jobs_are_not_counted() -> None:
    job = make_job(workers=1)
    launcher = launcher_job(job)
    stranger = launcher_pod(launcher, "Running", suffix="zzzzz")
    stranger["metadata"]["ownerReferences"][0]["uid"] = "an-older-job"
    _, update = sync(
        job,
        converged(
            job, launcher=launcher, launcher_pods=[launcher_pod(launcher, "Pending"), stranger]
        ),
    )
    assert update.status["replicaStatuses"]["Launcher"] == {}


@pytest.mark.parametrize(
    ("spec", "launcher_kwargs"),
    [({"runPolicy": {"suspend": True}}, {"suspend": True}), ({}, {"condition": "Complete"})],
    ids=["suspended", "done"],
)
def test_worker_status_empty_when_done_or_suspended(
    spec: dict[str, Any], launcher_kwargs: dict[str, Any]
) -> None:
    job = make_job(workers=2, **spec)
    observed = converged(
        job,
        worker_pods=workers(make_job(workers=2), 2),
        launcher=launcher_job(job, **launcher_kwargs),
    )
    _, update = sync(job, observed)
    assert update.status["replicaStatuses"]["Worker"] == {}


def test_start_time_set_once_and_not_while_suspended() -> None:
    job = make_job(workers=1)
    _, update = sync(job, Observed())
    assert update.status["startTime"] == "2026-11-25T22:00:00Z"
    later = sync(with_status(job, update.status), Observed(), now=NOW + timedelta(hours=1))[1]
    assert later.status["startTime"] == "2026-11-25T22:00:00Z"
    suspended = make_job(workers=1, runPolicy={"suspend": True})
    assert "startTime" not in sync(suspended, Observed())[1].status


def test_observed_generation_follows_the_spec() -> None:
    job = make_job(workers=2)
    observed = converged(job)
    _, update = sync(job, observed)
    assert update.status["observedGeneration"] == 1
    job = with_status(job, update.status)
    assert not sync(job, observed)[1].changed
    bumped = with_spec(job, workers=2)
    _, update = sync(bumped, observed)
    assert update.changed
    assert update.status["observedGeneration"] == 2


def test_mpi_job_success_counts() -> None:
    """TestMPIJobSuccess: {} -> workers Running -> launcher Running -> Job Complete."""
    job = make_job(
        workers=2, launcherCreationPolicy="AtStartup", runPolicy={"cleanPodPolicy": "Running"}
    )
    stages = [
        (Observed(), {"Launcher": {}, "Worker": {"selector": SELECTOR}}, []),
        (
            converged(job, launcher_pods=[]),
            {"Launcher": {}, "Worker": {"active": 2, "ready": 2, "selector": SELECTOR}},
            [],
        ),
        (
            converged(job),
            {"Launcher": {"active": 1}, "Worker": {"active": 2, "ready": 2, "selector": SELECTOR}},
            ["MPIJobRunning"],
        ),
        (
            converged(
                job,
                launcher=launcher_job(job, condition="Complete", completion_time=EARLIER),
                launcher_pods=[],
            ),
            {"Launcher": {"succeeded": 1}, "Worker": {}},
            ["MPIJobSucceeded"],
        ),
    ]
    for observed, replica_statuses, events in stages:
        _, update = sync(job, observed)
        assert update.status["replicaStatuses"] == replica_statuses
        assert [e.reason for e in update.events if e.reason != "MPIJobCreated"] == events
        job = with_status(job, update.status)
    assert job.status is not None
    assert [c.type for c in job.status.conditions] == ["Created", "Running", "Succeeded"]
    assert [c.status for c in job.status.conditions] == ["True", "False", "True"]


# --- the write decision ---------------------------------------------------------------------------

BASE = {
    "conditions": [
        {
            "type": "Created",
            "status": "True",
            "reason": "MPIJobCreated",
            "lastTransitionTime": "2026-11-25T22:00:00Z",
        },
        {"type": "Running", "status": "True", "reason": "MPIJobRunning"},
    ],
    "replicaStatuses": {"Worker": {"active": 2}},
    "startTime": "2026-11-25T22:00:00Z",
}


@pytest.mark.parametrize(
    ("other", "changed"),
    [
        ({**BASE, "startTime": "2026-11-25T22:00:00.000000Z"}, False),
        (
            {
                **BASE,
                "startTime": datetime(2026, 11, 25, 23, 0, tzinfo=timezone(timedelta(hours=1))),
            },
            False,
        ),
        ({**BASE, "conditions": list(reversed(BASE["conditions"]))}, False),
        ({**BASE, "replicaStatuses": {"Worker": {"active": 2, "failed": 0}}}, False),
        ({**BASE, "unknownField": 1}, False),
        ({**BASE, "replicaStatuses": {"Worker": {"active": 3}}}, True),
        ({**BASE, "replicaStatuses": {"Worker": {}}}, True),
        ({**BASE, "startTime": "2026-11-25T22:00:01Z"}, True),
        ({**BASE, "conditions": BASE["conditions"][:1]}, True),
        ({**BASE, "observedGeneration": 3}, True),
    ],
    ids=[
        "fractional-seconds",
        "other-offset",
        "condition-order",
        "zero-count",
        "unknown-field",
        "count",
        "counts-cleared",
        "start-time",
        "condition-removed",
        "generation",
    ],
)
def test_status_changed(other: dict[str, Any], changed: bool) -> None:
    assert status.status_changed(BASE, other) is changed
    assert status.status_changed(other, BASE) is changed


def test_status_merge_patch_clears_removed_counts() -> None:
    new = {
        **BASE,
        "replicaStatuses": {"Worker": {}, "Launcher": {"succeeded": 1}},
        "completionTime": EARLIER,
    }
    patch = status.status_merge_patch(BASE, new, resource_version="42")
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "status": {
            "replicaStatuses": {"Worker": {"active": None}, "Launcher": {"succeeded": 1}},
            "completionTime": EARLIER,
        },
    }
    assert status.status_merge_patch(BASE, BASE) == {"status": {}}


def test_current_status_round_trips_the_stored_wire_format() -> None:
    job = make_job(workers=1, status=BASE)
    assert status.current_status(job) == status.normalize_status(BASE)
    assert not status.status_changed(status.current_status(job), BASE)


def test_evicted_launcher_pod_is_a_launcher_failure_count_only() -> None:
    """An evicted launcher pod: the Job controller replaces it; the MPIJob mirrors Job.status.failed
    and neither fails nor reports MPIJobEvicted (that is about workers)."""
    job = make_job(workers=2)
    launcher = launcher_job(job, failed=1)
    pods = [
        launcher_pod(launcher, "Failed", reason="Evicted", message="node pressure", suffix="old"),
        launcher_pod(launcher, "Pending", suffix="new"),
    ]
    _, update = sync(job, converged(job, launcher=launcher, launcher_pods=pods))
    assert update.status["replicaStatuses"]["Launcher"] == {"failed": 1}
    assert [c["type"] for c in update.status["conditions"]] == ["Created"]
    assert [e.reason for e in update.events] == ["MPIJobCreated"]


def test_foreign_launcher_is_not_reported() -> None:
    """The plan reports the conflict (and the reconciler writes no status); status ignores the
    object."""
    job = make_job(workers=1)
    foreign = launcher_job(job, condition="Complete")
    foreign["metadata"]["ownerReferences"] = []
    update = status.compute_status(job, Observed(launcher_job=foreign), now=NOW)
    assert "Launcher" not in update.status["replicaStatuses"]
    assert "Succeeded" not in [c["type"] for c in update.status["conditions"]]
