"""`desired.workers.LazyWorkers`: the pods `build_worker` builds one by one, built only when read,
and a plan for a job whose workers all exist reads none of them (the planner finds them by name)."""

from __future__ import annotations

import pytest

from mpi_operator import planning
from mpi_operator.desired import workers as worker_builder
from mpi_operator.planning import Create

from ..planning.factory import build, converged, make_job, workers


@pytest.mark.parametrize("count", [0, 1, 3])
def test_lazy_workers_are_the_built_workers(count: int) -> None:
    job = make_job(workers=count)
    options = {
        "cluster_domain": "cluster.local",
        "hostnames": {0: "test-worker-0-r1"},
        "annotations": {count - 1: {"a": "b"}} if count else {},
    }
    lazy = worker_builder.LazyWorkers(job, **options)  # type: ignore[arg-type]
    eager = {
        i: worker_builder.build_worker(
            job,
            i,
            cluster_domain="cluster.local",
            hostname=options["hostnames"].get(i),  # type: ignore[attr-defined]
            annotations=options["annotations"].get(i),  # type: ignore[attr-defined]
        )
        for i in range(count)
    }
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


@pytest.mark.parametrize("indices", [[], [2], [5, 1, 1, 3], [0, 1, 2, 3, 4, 5]])
def test_a_window_of_lazy_workers_is_the_built_window(indices: list[int]) -> None:
    job = make_job(workers=5)
    lazy = worker_builder.LazyWorkers(job, indices=indices)
    eager = {i: worker_builder.build_worker(job, i) for i in sorted(set(indices)) if i < 5}
    assert list(lazy) == list(eager) == sorted(i for i in set(indices) if i < 5)
    assert lazy == eager


def test_membership_builds_nothing() -> None:
    # The planner asks `index in desired.workers` for every index; Mapping's own `in` would build
    # the pod.
    lazy = worker_builder.LazyWorkers(make_job(workers=40), indices=range(32))
    assert 31 in lazy
    assert 32 not in lazy
    assert "0" not in lazy
    assert lazy._built == {}
    with pytest.raises(KeyError):
        lazy[32]
