"""The chaos run's invariant checker (`bench/chaoslib/invariants.py`) sees each violation it counts:
fed a bad event sequence, the one counter goes up; fed the good twin of that sequence, every counter
stays 0. So a chaos run that prints zeros printed them from a checker that can fail."""

from __future__ import annotations

from typing import Any

import pytest
from chaoslib.invariants import VIOLATIONS, Checker, converged, visible_at

Obj = dict[str, Any]


def job(
    uid: str = "j1", *, workers: int = 2, conditions: tuple[str, ...] = ("Running",), **spec: Any
) -> Obj:
    status: Obj = {
        "observedGeneration": 1,
        "conditions": [{"type": c, "status": "True"} for c in conditions],
    }
    if {"Succeeded", "Failed"} & set(conditions):
        status["completionTime"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": {"name": "a", "uid": uid, "generation": 1},
        "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": workers}}, **spec},
        "status": status,
    }


def pod(
    uid: str, index: int, *, owner: str = "j1", phase: str = "Running", terminating: bool = False
) -> Obj:
    meta: Obj = {
        "name": f"a-worker-{uid}",
        "uid": uid,
        "labels": {
            "training.kubeflow.org/job-name": "a",
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": str(index),
        },
        "ownerReferences": [{"kind": "MPIJob", "uid": owner, "controller": True}],
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
    }


Event = tuple[str, str, Obj, float, bool]
"""(event, kind, object, now, deleted by the operator)"""

# name -> (bad sequence, the counter it must raise, a good twin that must raise nothing)
CASES: dict[str, tuple[list[Event], str, list[Event]]] = {
    "duplicate index": (
        [
            ("ADDED", "MPIJob", job(), 0, False),
            ("ADDED", "Pod", pod("p1", 0), 1, False),
            ("ADDED", "Pod", pod("p2", 0), 2, False),
        ],
        "duplicate_worker_indices",
        [
            ("ADDED", "MPIJob", job(), 0, False),
            ("ADDED", "Pod", pod("p1", 0), 1, False),
            ("MODIFIED", "Pod", pod("p1", 0, phase="Failed"), 1.5, False),
            ("ADDED", "Pod", pod("p2", 0), 2, False),
        ],
    ),
    "operator deletes a running worker below the count": (
        [
            ("ADDED", "MPIJob", job(workers=2), 0, False),
            ("ADDED", "Pod", pod("p1", 1), 1, False),
            ("MODIFIED", "Pod", pod("p1", 1, terminating=True), 2, True),
        ],
        "running_workers_deleted",
        [  # a scale-in: the index is at or above the new count
            ("ADDED", "MPIJob", job(workers=1), 0, False),
            ("ADDED", "Pod", pod("p1", 1), 1, False),
            ("MODIFIED", "Pod", pod("p1", 1, terminating=True), 2, True),
        ],
    ),
    "terminal condition reverted": (
        [
            ("ADDED", "MPIJob", job(conditions=("Succeeded",)), 0, False),
            ("MODIFIED", "MPIJob", job(conditions=("Running",)), 1, False),
        ],
        "terminal_reverted",
        [
            ("ADDED", "MPIJob", job(conditions=("Succeeded",)), 0, False),
            ("MODIFIED", "MPIJob", job(conditions=("Succeeded",)), 1, False),
        ],
    ),
    "child created late after its job's deletion": (
        [
            ("ADDED", "MPIJob", job(), 0, False),
            ("DELETED", "MPIJob", job(), 1, False),
            ("ADDED", "Pod", pod("p1", 0), 2.5, False),
        ],
        "children_after_deletion",
        [  # within the second a create already in flight may take
            ("ADDED", "MPIJob", job(), 0, False),
            ("DELETED", "MPIJob", job(), 1, False),
            ("ADDED", "Pod", pod("p1", 0), 1.9, False),
        ],
    ),
    "child without an owner": (
        [
            (
                "ADDED",
                "ConfigMap",
                {"metadata": {"name": "a-config", "labels": pod("x", 0)["metadata"]["labels"]}},
                0,
                False,
            )
        ],
        "children_without_owner",
        [("ADDED", "ConfigMap", {"metadata": {"name": "other", "labels": {}}}, 0, False)],
    ),
}


def feed(events: list[Event]) -> Checker:
    checker = Checker(grace=1.0)
    for event, kind, obj, now, by_operator in events:
        checker.observe(event, kind, obj, now, deleted_by_operator=by_operator)
    return checker


@pytest.mark.parametrize("case", CASES)
def test_a_bad_sequence_raises_its_counter_and_its_good_twin_none(case: str) -> None:
    bad, counter, good = CASES[case]
    flagged = feed(bad)
    assert flagged.counts[counter] == 1, flagged.counts
    assert flagged.violations == 1
    assert flagged.details
    assert counter in flagged.details[0]
    clean = feed(good)
    assert clean.violations == 0, clean.details
    assert all(clean.counts[name] == 0 for name in VIOLATIONS)


def test_operator_deletes_do_not_count_when_the_job_is_not_running_or_someone_else_deleted() -> (
    None
):
    suspended = job(runPolicy={"suspend": True})
    for events in (
        [("ADDED", "MPIJob", suspended, 0, False), ("ADDED", "Pod", pod("p", 0), 1, False)],
        [
            ("ADDED", "MPIJob", job(conditions=()), 0, False),
            ("ADDED", "Pod", pod("p", 0), 1, False),
        ],
    ):
        checker = feed([*events, ("MODIFIED", "Pod", pod("p", 0, terminating=True), 2, True)])
        assert checker.violations == 0, checker.details
    by_user = feed(
        [
            ("ADDED", "MPIJob", job(), 0, False),
            ("ADDED", "Pod", pod("p", 0), 1, False),
            ("DELETED", "Pod", pod("p", 0), 2, False),
        ]
    )
    assert by_user.violations == 0


def test_a_late_child_counts_from_when_the_deletion_could_be_seen() -> None:
    """The leader's MPIJob informer waited to retry a failed WATCH from 0.5 s to 3 s: a deletion at
    1 s is visible at 3 s, so a child at 3.5 s is within the grace, one at 4.5 s is not."""
    checker = Checker(grace=1.0, known_at=lambda deleted: 3.0 if 0.5 <= deleted <= 3.0 else deleted)
    for event, kind, obj, now, _ in [
        ("ADDED", "MPIJob", job(), 0, False),
        ("DELETED", "MPIJob", job(), 1, False),
        ("ADDED", "Pod", pod("p1", 0), 3.5, False),
    ]:
        checker.observe(event, kind, obj, now)
    assert checker.violations == 0
    assert checker.counts["children_late_while_blind"] == 1
    checker.observe("ADDED", "Pod", pod("p2", 1), 4.5)
    assert checker.counts["children_after_deletion"] == 1
    assert "1.50s after it was visible" in checker.details[0]


@pytest.mark.parametrize(("deleted_at", "violations"), [(1.5, 0), (2.5, 1)])
def test_a_delete_racing_the_change_that_made_it_wrong_is_within_the_grace(
    deleted_at: float, violations: int
) -> None:
    """Resumed at 1 s: a worker delete decided on the suspended job may land within the grace."""
    checker = feed(
        [
            ("ADDED", "MPIJob", job(runPolicy={"suspend": True}), 0, False),
            ("ADDED", "Pod", pod("p", 0), 0.5, False),
            ("MODIFIED", "MPIJob", job(), 1.0, False),
            ("MODIFIED", "Pod", pod("p", 0, terminating=True), deleted_at, True),
        ]
    )
    assert checker.counts["running_workers_deleted"] == violations
    assert checker.counts["worker_deletes_racing_a_change"] == 1 - violations


@pytest.mark.parametrize(
    ("changed", "waits", "seen"),
    [
        (5.0, [], 5.0),
        (5.0, [(1.0, 2.0)], 5.0),  # the wait was over
        (5.0, [(4.0, 6.0)], 6.0),
        (5.0, [(4.0, 6.0), (6.2, 9.0)], 9.0),  # the retry at 6.0 failed: still blind until 9
        (5.0, [(4.0, 6.0), (7.0, 9.0)], 6.0),  # a second between them: the retry at 6.0 got through
        (5.0, [(6.2, 9.0), (4.0, 6.0)], 9.0),  # in any order
        (5.3, [(5.5, 7.0)], 7.0),  # the attempt under way at the change failed
    ],
)
def test_a_change_is_visible_after_the_retry_waits_covering_it(
    changed: float, waits: list[tuple[float, float]], seen: float
) -> None:
    assert visible_at(changed, waits, retry=0.5) == seen


def test_an_eviction_failure_without_completion_time_may_give_way_to_the_launchers_outcome() -> (
    None
):
    evicted = job(conditions=("Failed",))
    del evicted["status"]["completionTime"]
    checker = feed(
        [
            ("ADDED", "MPIJob", evicted, 0, False),
            ("MODIFIED", "MPIJob", job(conditions=("Succeeded",)), 1, False),
        ]
    )
    assert checker.violations == 0


def test_orphans_are_children_whose_owner_is_gone() -> None:
    checker = Checker()
    checker.orphans(
        [("Pod", pod("p1", 0, owner="gone")), ("Pod", pod("p2", 0, owner="j1"))], {"j1"}, 9.0
    )
    assert checker.counts["children_without_owner"] == 1
    assert "outlived gone" in checker.details[0]


@pytest.mark.parametrize(
    ("the_job", "workers", "launchers", "why"),
    [
        (job(workers=2), [pod("p0", 0), pod("p1", 1)], [pod("l", 0)], None),
        (job(workers=2), [pod("p0", 0)], [pod("l", 0)], "live worker indices [0], want 0..1"),
        (job(workers=1), [pod("p0", 0)], [], "no live launcher"),
        (job(conditions=()), [], [], "not Running"),
        (job(conditions=("Failed",)), [], [], None),
        (job(conditions=("Suspended",), runPolicy={"suspend": True}), [], [], None),
        (
            job(conditions=("Suspended",), runPolicy={"suspend": True}),
            [pod("p0", 0)],
            [],
            "suspended but 1 workers and 0 launchers live",
        ),
        (
            job(workers=1, elasticPolicy={"maxReplicas": 3}),
            [pod("p0", 0)],
            [pod("l", 0)],
            "status.elastic {'desired': None, 'ready': None, 'discovered': None, 'draining': "
            "None}, "
            "want 1 desired, ready and discovered",
        ),
    ],
)
def test_converged_says_why_not(
    the_job: Obj, workers: list[Obj], launchers: list[Obj], why: str | None
) -> None:
    assert converged(the_job, workers, launchers) == why
