"""The two-phase finish: the launcher Job ends -> terminal condition + completionTime -> next sync
cleans up per cleanPodPolicy (TestShutdownWorker, TestMPIJobSuccess, TestMPIJobFailure)."""

from __future__ import annotations

import pytest

from mpi_operator import conditions, planning
from mpi_operator.planning import Delete

from .factory import (
    EARLIER,
    converged,
    launcher_job,
    make_job,
    plan_for,
    steps,
    sync,
    with_status,
    worker,
    workers,
)

SUCCEEDED = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
        {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"},
    ],
    "startTime": EARLIER,
    "completionTime": EARLIER,
}


def test_shutdown_worker() -> None:
    """Succeeded + completionTime, cleanPodPolicy All, 8 workers: delete worker-0..7 in index
    order."""
    job = make_job(workers=8, runPolicy={"cleanPodPolicy": "All"}, status=SUCCEEDED)
    launcher = launcher_job(job, condition="Complete", completion_time=EARLIER)
    observed = converged(job, worker_pods=workers(job, 8), launcher=launcher, launcher_pods=[])
    the_plan, update = sync(job, observed)
    assert steps(the_plan) == [f"delete Pod default/test-worker-{i}" for i in range(8)]
    assert update.status["replicaStatuses"] == {"Worker": {}}
    assert update.changed
    assert update.events == ()


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("All", ["test-worker-0", "test-worker-1", "test-worker-2", "test-worker-3", "test"]),
        ("Running", ["test-worker-0", "test-worker-3", "test"]),
        ("None", []),
    ],
    ids=["all", "running", "none"],
)
def test_clean_pod_policy(policy: str, expected: list[str]) -> None:
    job = make_job(workers=4, runPolicy={"cleanPodPolicy": policy}, status=SUCCEEDED)
    pods = [
        worker(job, 0),
        worker(job, 1, "Succeeded"),
        worker(job, 2, "Failed"),
        worker(job, 3, "Pending"),
    ]
    launcher = launcher_job(job, condition="Complete", completion_time=EARLIER)
    observed = converged(job, worker_pods=pods, launcher=launcher, launcher_pods=[], gang="volcano")
    the_plan = plan_for(job, observed, gang="volcano")
    assert [a.ref.name for a in the_plan.actions] == expected
    assert all(isinstance(a, Delete) for a in the_plan.actions)
    if expected:
        assert the_plan.actions[-1].ref.kind == "PodGroup"
        assert the_plan.actions[-1].ref.api_version == "scheduling.volcano.sh/v1beta1"


def test_finish_cleans_up_workers_above_the_count_too() -> None:
    job = make_job(workers=2, runPolicy={"cleanPodPolicy": "All"}, status=SUCCEEDED)
    observed = converged(
        job, worker_pods=[*workers(job, 2), worker(make_job(workers=3), 2)], launcher_pods=[]
    )
    assert [a.ref.name for a in plan_for(job, observed).actions] == [
        "test-worker-0",
        "test-worker-1",
        "test-worker-2",
    ]


def test_finish_does_not_delete_terminating_pods_again() -> None:
    job = make_job(workers=2, runPolicy={"cleanPodPolicy": "All"}, status=SUCCEEDED)
    observed = converged(
        job, worker_pods=[worker(job, 0, terminating=True), worker(job, 1)], launcher_pods=[]
    )
    assert steps(plan_for(job, observed)) == ["delete Pod default/test-worker-1"]


@pytest.mark.parametrize(
    ("condition", "terminal"),
    [("Complete", "Succeeded"), ("Failed", "Failed")],
    ids=["succeeded", "failed"],
)
def test_two_phase_finish(condition: str, terminal: str) -> None:
    """TestMPIJobSuccess / TestMPIJobFailure: the sync that sees the Job end only writes the status;
    the next one (triggered by that status write) deletes the workers."""
    job = make_job(workers=2, runPolicy={"cleanPodPolicy": "Running"})
    launcher = launcher_job(
        job, condition=condition, reason="BackoffLimitExceeded", completion_time=EARLIER
    )
    observed = converged(job, worker_pods=workers(job, 2), launcher=launcher, launcher_pods=[])

    first, update = sync(job, observed)
    assert first.empty, steps(first)
    assert (terminal, "True") in [(c["type"], c["status"]) for c in update.status["conditions"]]
    assert update.status["completionTime"]
    assert update.status["replicaStatuses"]["Worker"] == {}

    job = with_status(job, update.status)
    assert planning.is_completed(job)
    second, update = sync(job, observed)
    assert steps(second) == ["delete Pod default/test-worker-0", "delete Pod default/test-worker-1"]
    assert update.events == ()

    job = with_status(job, update.status)
    third, update = sync(job, planning.observed_after(observed, second))
    assert third.empty
    assert not update.changed


def test_finished_without_completion_time_keeps_reconciling() -> None:
    """An evicted-worker Failed has no completionTime: not the second phase, children still
    reconciled."""
    evicted = {
        "conditions": [{"type": "Failed", "status": "True", "reason": "MPIJobEvicted"}],
        "startTime": EARLIER,
    }
    job = make_job(workers=2, runPolicy={"cleanPodPolicy": "All"}, status=evicted)
    assert conditions.is_finished(job.status)
    assert not planning.is_completed(job)
    observed = converged(job, worker_pods=[worker(job, 0)])
    assert steps(plan_for(job, observed)) == ["create Pod default/test-worker-1"]
