"""`desired.workers.LazyWorkers`: the same pods as `build_workers`, built only when read, and a plan for a
job whose workers all exist reads none of them (the planner finds existing workers by name)."""

from __future__ import annotations

import pytest
from reconcile_factory import build, converged, make_job, workers

from mpi_operator import planning
from mpi_operator.desired import workers as worker_builder
from mpi_operator.planning import Create


@pytest.mark.parametrize("count", [0, 1, 3])
def test_lazy_workers_are_the_built_workers(count: int) -> None:
    job = make_job(workers=count)
    options = {
        "cluster_domain": "cluster.local",
        "hostnames": {0: "test-worker-0-r1"},
        "annotations": {count - 1: {"a": "b"}} if count else {},
    }
    lazy = worker_builder.LazyWorkers(job, **options)  # type: ignore[arg-type]
    eager = worker_builder.build_workers(job, **options)  # type: ignore[arg-type]
    assert len(lazy) == len(eager) == count
    assert list(lazy) == list(eager)
    assert lazy == eager
    with pytest.raises(KeyError):
        lazy[count]


def test_a_plan_builds_only_the_workers_it_creates() -> None:
    job = make_job(workers=4)
    observed = converged(job, worker_pods=workers(job, 3))  # worker 3 is missing
    state = build(job, observed)
    assert isinstance(state.workers, worker_builder.LazyWorkers)
    plan = planning.plan(state, observed, job=job)
    created = [a.ref.name for a in plan.actions if isinstance(a, Create)]
    assert created == ["test-worker-3"]
    assert set(state.workers._built) == {3}
