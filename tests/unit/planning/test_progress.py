"""A static job's progress writes (`planning.progress`, `status.progress_only`,
`reconcile.progress_pacer`), table-driven: which status changes are progress and which must go at
once, when a job's pods count as settled, which ConfigMap update only refreshes discover_hosts.sh,
and the pacer's arithmetic."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator import status
from mpi_operator.desired import config
from mpi_operator.planning import Observed, Update, progress
from mpi_operator.reconcile.progress_pacer import progress_hold

from .factory import converged, launcher_job, launcher_pod, make_job, plan_for, worker, workers

T = "2026-11-25T21:00:00Z"
CREATED = {
    "type": "Created",
    "status": "True",
    "reason": "MPIJobCreated",
    "message": "m",
    "lastUpdateTime": T,
}
RUNNING = {
    "type": "Running",
    "status": "True",
    "reason": "MPIJobRunning",
    "message": "m",
    "lastUpdateTime": T,
}
STOPPED = {**RUNNING, "status": "False", "reason": "MPIJobSuspended"}
FAILED = {
    "type": "Failed",
    "status": "True",
    "reason": "MPIJobFailed",
    "message": "m",
    "lastUpdateTime": T,
}


def st(
    *conditions: dict[str, Any], worker: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "conditions": list(conditions),
        "replicaStatuses": {"Launcher": {}, "Worker": {"selector": "s", **(worker or {})}},
        "startTime": T,
        **extra,
    }


PROGRESS_CASES = [
    ("a worker becomes active", st(CREATED), st(CREATED, worker={"active": 1}), True),
    (
        "a worker becomes ready",
        st(CREATED, worker={"active": 2}),
        st(CREATED, worker={"active": 2, "ready": 1}),
        True,
    ),
    (
        "Running turns True",
        st(CREATED, worker={"active": 2}),
        st(CREATED, RUNNING, worker={"active": 2}),
        True,
    ),
    (
        "a worker succeeded",
        st(CREATED, RUNNING),
        st(CREATED, RUNNING, worker={"succeeded": 1}),
        True,
    ),
    ("the first status", {}, st(CREATED), False),
    ("a worker failed", st(CREATED, RUNNING), st(CREATED, RUNNING, worker={"failed": 1}), False),
    ("a failure condition", st(CREATED, RUNNING), st(CREATED, RUNNING, FAILED), False),
    ("Running turns False", st(CREATED, RUNNING), st(CREATED, STOPPED), False),
    ("Running back to True", st(CREATED, STOPPED), st(CREATED, RUNNING), False),
    ("a completion time", st(CREATED, RUNNING), st(CREATED, RUNNING, completionTime=T), False),
    ("a new generation", st(CREATED), st(CREATED, observedGeneration=2), False),
    ("counts and a failure", st(CREATED), st(CREATED, FAILED, worker={"active": 1}), False),
    (
        "nothing changed",
        st(CREATED, worker={"active": 1}),
        st(CREATED, worker={"active": 1}),
        False,
    ),
]


@pytest.mark.parametrize(
    ("what", "old", "new", "expected"), PROGRESS_CASES, ids=[c[0] for c in PROGRESS_CASES]
)
def test_progress_only(what: str, old: dict[str, Any], new: dict[str, Any], expected: bool) -> None:
    assert status.progress_only(old, new) is expected


def test_settled_follows_the_pods() -> None:
    job = make_job(workers=3)
    launcher = launcher_job(job)
    running = launcher_pod(launcher)
    assert progress.settled(job, converged(job))
    cases: list[tuple[str, Observed, bool]] = [
        ("a worker missing", converged(job, worker_pods=workers(job, 2)), False),
        (
            "a worker pending",
            converged(job, worker_pods=[*workers(job, 2), worker(job, 2, "Pending")]),
            False,
        ),
        (
            "a worker not ready",
            converged(job, worker_pods=[*workers(job, 2), worker(job, 2, ready=False)]),
            False,
        ),
        (
            "a worker terminating",
            converged(job, worker_pods=[*workers(job, 2), worker(job, 2, terminating=True)]),
            False,
        ),
        (
            "a worker failed",
            converged(job, worker_pods=[*workers(job, 2), worker(job, 2, "Failed")]),
            True,
        ),
        ("no launcher pod yet", converged(job, launcher=launcher, launcher_pods=[]), False),
        (
            "the launcher pending",
            converged(job, launcher_pods=[launcher_pod(launcher, "Pending")]),
            False,
        ),
        ("the launcher running", converged(job, launcher=launcher, launcher_pods=[running]), True),
        (
            "no launcher Job (waiting for workers)",
            Observed(worker_pods=tuple(workers(job, 3))),
            True,
        ),
    ]
    for what, observed, expected in cases:
        assert progress.settled(job, observed) is expected, what


def test_a_finished_or_suspended_job_is_settled() -> None:
    job = make_job(workers=2)
    done = launcher_job(job, condition="Complete")
    assert progress.settled(job, converged(job, worker_pods=[], launcher=done, launcher_pods=[]))
    suspended = make_job(workers=2)
    suspended = suspended.model_copy(
        update={
            "spec": suspended.spec.model_copy(
                update={
                    "run_policy": suspended.spec.run_policy.model_copy(update={"suspend": True})
                }
            )
        }
    )
    assert progress.settled(suspended, Observed())


def test_only_a_discover_hosts_refresh_is_held_back() -> None:
    job = make_job(workers=2)
    observed = converged(job)
    assert observed.config_map is not None
    fewer = copy.deepcopy(dict(observed.config_map))
    fewer["data"][config.DISCOVER_HOSTS_KEY] = "#!/bin/sh\n"  # one worker became Ready since
    stale = Observed(**{**observed.__dict__, "config_map": fewer})
    plan = plan_for(job, stale)
    assert [a.ref.kind for a in plan.actions if isinstance(a, Update)] == ["ConfigMap"]
    kept, held = progress.without_discovery_refresh(plan, stale)
    assert held
    assert kept.actions == ()

    other_hostfile = copy.deepcopy(fewer)
    other_hostfile["data"][config.HOSTFILE_KEY] = "someone-else slots=1\n"
    changed = Observed(**{**observed.__dict__, "config_map": other_hostfile})
    plan = plan_for(job, changed)
    kept, held = progress.without_discovery_refresh(plan, changed)
    assert not held
    assert kept == plan


def test_the_pacer_holds_progress_for_at_most_a_period_since_the_last_write() -> None:
    assert progress_hold(None, 5.0, 1.0, settled=False) == 0.0  # nothing written yet: at once
    assert progress_hold(5.0, 5.25, 1.0, settled=False) == pytest.approx(0.75)
    assert progress_hold(5.0, 5.25, 1.0, settled=True) == 0.0
    assert progress_hold(5.0, 6.0, 1.0, settled=False) == 0.0
    assert progress_hold(5.0, 5.25, 0.0, settled=False) == 0.0
