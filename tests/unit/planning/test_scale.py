"""Worker replicas changing under a running job: upstream's getOrCreateWorker, plus the fixes we
make."""

from __future__ import annotations

import pytest

from mpi_operator import planning
from mpi_operator.planning import Create, Delete, ElasticWrites, Observed

from .factory import converged, make_job, plan_for, steps, with_spec, worker, workers


def _observed(job, pods):  # type: ignore[no-untyped-def]
    return converged(job, worker_pods=pods)


def test_scale_up_creates_missing_workers_and_rewrites_hostfile() -> None:
    job = make_job(workers=2)
    observed = _observed(job, workers(job, 2))
    bigger = with_spec(job, workers=4)
    the_plan = plan_for(bigger, observed)
    assert steps(the_plan) == [
        "update ConfigMap default/test-config (data)",
        "create Pod default/test-worker-2",
        "create Pod default/test-worker-3",
    ]
    cm = the_plan.actions[0]
    assert isinstance(cm, planning.Update)
    assert cm.obj["data"]["hostfile"].count("slots=1") == 4


def test_scale_down_deletes_excess_highest_first() -> None:
    job = make_job(workers=4)
    observed = _observed(job, workers(job, 4))
    smaller = with_spec(job, workers=2)
    the_plan = plan_for(smaller, observed)
    assert the_plan.excess_workers == (3, 2)
    deletes = [a for a in the_plan.actions if isinstance(a, Delete)]
    assert [d.ref.name for d in deletes] == ["test-worker-3", "test-worker-2"]
    assert [d.uid for d in deletes] == ["uid-pod-test-worker-3", "uid-pod-test-worker-2"]
    assert all(d.propagation_policy == "Background" for d in deletes)
    # Deleted before any create, as upstream (and the hostfile shrinks in the same sync).
    assert steps(the_plan)[0] == "update ConfigMap default/test-config (data)"


def test_scale_down_can_leave_pacing_to_the_caller() -> None:
    """The elastic pacing deletes excess workers itself, after their grace period."""
    job = make_job(workers=4)
    observed = _observed(job, workers(job, 4))
    the_plan = plan_for(
        with_spec(job, workers=2), observed, elastic=ElasticWrites(paces_scale_in=True)
    )
    assert the_plan.excess_workers == (3, 2)
    assert not any(isinstance(a, Delete) for a in the_plan.actions)


def test_terminating_excess_workers_are_not_deleted_again() -> None:
    job = make_job(workers=4)
    pods = [*workers(job, 2), worker(job, 2, terminating=True), worker(job, 3, terminating=True)]
    the_plan = plan_for(with_spec(job, workers=2), _observed(with_spec(job, workers=2), pods))
    assert the_plan.excess_workers == ()
    assert the_plan.empty, steps(the_plan)


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_finished_workers_of_static_jobs_are_not_replaced(phase: str) -> None:
    """Upstream never recreates a worker pod that exists, whatever its phase."""
    job = make_job(workers=3)
    pods = [worker(job, 0), worker(job, 1, phase, reason="Error"), worker(job, 2)]
    assert plan_for(job, _observed(job, pods)).empty


def test_deleted_worker_is_recreated() -> None:
    job = make_job(workers=3)
    observed = _observed(job, [worker(job, 0), worker(job, 2)])
    the_plan = plan_for(job, observed)
    assert steps(the_plan) == ["create Pod default/test-worker-1"]
    create = the_plan.actions[0]
    assert isinstance(create, Create)
    assert create.obj["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"


def test_terminating_worker_in_range_waits_for_its_name() -> None:
    job = make_job(workers=2)
    observed = _observed(job, [worker(job, 0), worker(job, 1, terminating=True)])
    assert not any(isinstance(a, Create) for a in plan_for(job, observed).actions)


def test_launcher_as_worker_scale_down_keeps_the_last_worker() -> None:
    """Upstream compares the shifted replica-index label and deletes worker replicas-1; we use the
    name."""
    job = make_job(workers=3, runLauncherAsWorker=True)
    observed = _observed(job, workers(job, 3))
    smaller = with_spec(job, workers=2)
    the_plan = plan_for(smaller, observed)
    assert the_plan.excess_workers == (2,)
    assert [a.ref.name for a in the_plan.actions if isinstance(a, Delete)] == ["test-worker-2"]


def test_foreign_pods_above_the_count_are_not_deleted() -> None:
    job = make_job(workers=2)
    stranger = worker(make_job(workers=4), 3, owner_uid="someone-else")
    observed = _observed(job, [*workers(job, 2), stranger])
    the_plan = plan_for(job, observed)
    assert the_plan.excess_workers == ()
    assert the_plan.empty


def test_scale_to_zero_leaves_only_the_launcher() -> None:
    job = make_job(workers=2)
    observed = _observed(job, workers(job, 2))
    the_plan = plan_for(with_spec(job, workers=0), observed)
    assert [a.ref.name for a in the_plan.actions if isinstance(a, Delete)] == [
        "test-worker-1",
        "test-worker-0",
    ]
    after = planning.observed_after(observed, the_plan)
    assert after.worker_pods == ()
    assert isinstance(after, Observed)
