"""The WorkersPending condition and its Warning: workers the scheduler cannot place, said in its
own words, once per change (the count or the message), gone once every worker is placed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from mpi_operator import reasons, status
from mpi_operator.api import MPIJob

from .planning.factory import (
    LATER,
    NOW,
    converged,
    make_job,
    sync,
    with_spec,
    with_status,
    worker,
)

FIT_ERROR = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
LATER_DT = NOW + timedelta(minutes=1)


def unschedulable(job: MPIJob, index: int, message: str = FIT_ERROR) -> dict[str, Any]:
    pod = worker(job, index, "Pending", ready=False)
    del pod["spec"]["nodeName"]
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return pod


def pending_condition(update: status.StatusUpdate) -> dict[str, Any] | None:
    return next(
        (x for x in update.status.get("conditions", []) if x["type"] == "WorkersPending"), None
    )


def pending_events(update: status.StatusUpdate) -> list[str]:
    return [e.message for e in update.events if e.reason == reasons.WORKERS_PENDING]


def test_unplaceable_workers_are_named_with_the_schedulers_message() -> None:
    job = make_job(workers=4)
    pods = [worker(job, 0), worker(job, 1), unschedulable(job, 3), unschedulable(job, 2)]
    _, update = sync(job, converged(job, worker_pods=pods))
    message = f"2/4 workers are Pending; test-worker-2: {FIT_ERROR}"
    assert pending_condition(update) == {
        "type": "WorkersPending",
        "status": "True",
        "reason": "Unschedulable",
        "message": message,
        "lastUpdateTime": status.format_time(NOW),
        "lastTransitionTime": status.format_time(NOW),
    }
    assert update.status["conditions"][-1]["type"] == "WorkersPending"  # kubectl's State column
    assert [(e.type, e.message) for e in update.events if e.reason == "WorkersPending"] == [
        ("Warning", message)
    ]
    assert update.pending_workers == 2


def test_the_same_situation_says_nothing_again() -> None:
    job = make_job(workers=2)
    observed = converged(job, worker_pods=[worker(job, 0), unschedulable(job, 1)])
    _, first = sync(job, observed)
    again = with_status(job, first.status)
    _, second = sync(again, observed, now=LATER_DT)
    assert pending_events(second) == []
    assert not status.status_changed(first.status, second.status)
    assert second.pending_workers == 1


def test_a_new_count_is_news_and_keeps_the_transition_time() -> None:
    job = make_job(workers=3)
    one = converged(job, worker_pods=[worker(job, 0), worker(job, 1), unschedulable(job, 2)])
    _, first = sync(job, one)
    two = converged(job, worker_pods=[worker(job, 0), unschedulable(job, 1), unschedulable(job, 2)])
    _, second = sync(with_status(job, first.status), two, now=LATER_DT)
    assert pending_events(second) == [f"2/3 workers are Pending; test-worker-1: {FIT_ERROR}"]
    before, after = pending_condition(first), pending_condition(second)
    assert before is not None
    assert after is not None
    assert after["lastTransitionTime"] == before["lastTransitionTime"]
    assert after["lastUpdateTime"] == status.format_time(LATER_DT)


def test_the_condition_goes_once_every_worker_is_placed() -> None:
    job = make_job(workers=2)
    _, first = sync(job, converged(job, worker_pods=[worker(job, 0), unschedulable(job, 1)]))
    placed = worker(job, 1, "Pending", ready=False)  # bound, its containers starting
    _, second = sync(
        with_status(job, first.status), converged(job, worker_pods=[worker(job, 0), placed])
    )
    assert pending_condition(second) is None
    assert pending_events(second) == []
    assert second.pending_workers == 0


def test_a_suspended_job_has_no_pending_workers() -> None:
    job = make_job(workers=2)
    _, first = sync(job, converged(job, worker_pods=[worker(job, 0), unschedulable(job, 1)]))
    suspended = with_status(with_spec(job, runPolicy={"suspend": True}), first.status)
    _, second = sync(suspended, converged(suspended, worker_pods=[]))
    assert pending_condition(second) is None


def test_a_terminating_or_scheduled_pod_is_not_pending() -> None:
    job = make_job(workers=2)
    gone = unschedulable(job, 0)
    gone["metadata"]["deletionTimestamp"] = LATER
    _, update = sync(job, converged(job, worker_pods=[gone, worker(job, 1)]))
    assert pending_condition(update) is None
    assert update.pending_workers == 0
