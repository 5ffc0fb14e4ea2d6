"""One sync creates at most a window of missing workers (`planning.worker_window`), lowest indices
first; the plan counts the rest in `deferred_workers` and holds the launcher back until none is
left. A job that fits in one window is planned exactly as without one, and syncing window by window
creates every worker exactly once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator import desired, planning
from mpi_operator.api.models import MPIJob
from mpi_operator.planning import WORKER_WINDOW, Create, Observed, Plan, WorkerWindow, worker_window
from mpi_operator.settings import Settings

from .factory import KEYS, make_job, served, steps, worker


def observed_with(job: MPIJob, indices: set[int]) -> Observed:
    return Observed(worker_pods=tuple(worker(job, i) for i in sorted(indices)))


def windowed_plan(job: MPIJob, observed: Observed, size: int = WORKER_WINDOW) -> Plan:
    """What the reconciler plans: desired builds only the window's workers."""
    window = worker_window(job, observed, size)
    state = desired.build(
        job,
        observed_pods=observed.worker_pods,
        settings=Settings(),
        ssh_keys=KEYS if planning.secret_needs_keys(observed.secret) else None,
        worker_indices=window.indices,
    )
    return planning.plan(state, observed, job=job)


def full_plan(job: MPIJob, observed: Observed) -> Plan:
    state = desired.build(
        job, observed_pods=observed.worker_pods, settings=Settings(), ssh_keys=KEYS
    )
    return planning.plan(state, observed, job=job)


@pytest.mark.parametrize(
    ("replicas", "present", "size", "expected"),
    [
        (0, set(), 4, WorkerWindow((), 0)),
        (3, set(), 4, WorkerWindow((0, 1, 2), 0)),
        (4, set(), 4, WorkerWindow((0, 1, 2, 3), 0)),
        (10, set(), 4, WorkerWindow((0, 1, 2, 3), 6)),
        (10, {0, 1, 2, 3}, 4, WorkerWindow((4, 5, 6, 7), 2)),
        (10, {1, 3, 5}, 4, WorkerWindow((0, 2, 4, 6), 3)),
        (10, set(range(10)), 4, WorkerWindow((), 0)),
        (3, {7}, 4, WorkerWindow((0, 1, 2), 0)),  # a pod beyond the count is not a worker to create
    ],
)
def test_the_window_is_the_lowest_missing_indices(
    replicas: int, present: set[int], size: int, expected: WorkerWindow
) -> None:
    job = make_job("foo", workers=replicas)
    assert worker_window(job, observed_with(job, present), size) == expected


@given(
    replicas=st.integers(0, 80),
    present=st.sets(st.integers(0, 90), max_size=40),
    size=st.integers(1, 40),
)
def test_the_window_never_exceeds_its_size_and_accounts_for_every_missing_worker(
    replicas: int, present: set[int], size: int
) -> None:
    job = make_job("foo", workers=replicas)
    window = worker_window(job, observed_with(job, present), size)
    missing = [i for i in range(replicas) if i not in present]
    assert len(window.indices) <= size
    assert list(window.indices) == missing[: len(window.indices)]
    assert len(window.indices) + window.deferred == len(missing)


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive, got 0"):
        worker_window(make_job("foo"), Observed(), 0)


@pytest.mark.parametrize("replicas", [0, 1, 8, WORKER_WINDOW])
@pytest.mark.parametrize("policy", ["AtStartup", "WaitForWorkersReady"])
def test_a_job_that_fits_in_one_window_is_planned_as_without_one(
    replicas: int, policy: str
) -> None:
    job = make_job("foo", workers=replicas, launcherCreationPolicy=policy)
    for observed in (Observed(), observed_with(job, set(range(0, replicas, 2)))):
        windowed, full = windowed_plan(job, observed), full_plan(job, observed)
        assert steps(windowed) == steps(full)
        assert windowed.waiting_for_workers == full.waiting_for_workers
        assert windowed.deferred_workers == 0


def test_a_big_job_is_created_window_by_window_each_worker_once_and_the_launcher_last() -> None:
    replicas = 2 * WORKER_WINDOW + 5
    job = make_job("foo", workers=replicas, launcherCreationPolicy="AtStartup")
    observed, created, plans = Observed(), [], 0
    while True:
        plan = windowed_plan(job, observed)
        if plan.empty:
            break
        plans += 1
        pods = [a.ref.name for a in plan.actions if isinstance(a, Create) and a.ref.kind == "Pod"]
        assert len(pods) <= WORKER_WINDOW
        assert plan.deferred_workers == replicas - len(created) - len(pods)
        launcher = [a for a in plan.actions if a.ref.kind == "Job"]
        assert bool(launcher) == (plan.deferred_workers == 0), "the launcher before the last worker"
        created += pods
        # What the stores hold once the plan is applied, as the API server returns it.
        after = planning.observed_after(observed, plan)
        observed = Observed(
            service=after.service,
            config_map=after.config_map,
            secret=after.secret,
            launcher_job=served(after.launcher_job) if after.launcher_job is not None else None,
            worker_pods=tuple(served(pod) for pod in after.worker_pods),
        )
    assert plans == 3
    assert created == [f"foo-worker-{i}" for i in range(replicas)]


def test_a_window_waits_for_the_rest_before_waiting_for_readiness() -> None:
    """WaitForWorkersReady counts every worker of the job, not those the window builds."""
    job = make_job("foo", workers=WORKER_WINDOW + 1, launcherCreationPolicy="WaitForWorkersReady")
    ready_window = observed_with(job, set(range(WORKER_WINDOW)))
    plan = windowed_plan(job, ready_window)
    assert steps(plan)[-1] == f"create Pod default/foo-worker-{WORKER_WINDOW}"
    assert plan.waiting_for_workers
    plan = windowed_plan(job, observed_with(job, set(range(WORKER_WINDOW + 1))))
    assert steps(plan)[-1] == "create Job default/foo-launcher"
