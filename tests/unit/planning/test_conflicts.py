"""Objects with our names that the job does not control: reported, never adopted or overwritten, and
the plan stops where upstream's sync returns its error (Test*NotControlledByUs)."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.planning import Delete, Observed

from .factory import (
    EARLIER,
    build,
    converged,
    launcher_job,
    make_job,
    plan_for,
    served,
    steps,
    workers,
)


def _foreign(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = []
    return obj


def test_launcher_not_controlled_by_us() -> None:
    job = make_job(workers=64)
    observed = Observed(launcher_job=_foreign(launcher_job(job)))
    the_plan = plan_for(job, observed)
    assert the_plan.actions == ()
    assert [str(c.ref) for c in the_plan.conflicts] == ["Job default/test-launcher"]
    assert the_plan.conflicts[0].reason == "ErrResourceExists"
    assert the_plan.conflicts[0].message == (
        'Resource "test-launcher" of Kind "Job" already exists and is not managed by MPIJob'
    )
    assert not the_plan.empty


def test_config_map_not_controlled_by_us() -> None:
    job = make_job(workers=64)
    observed = Observed(
        service=served(build(job).service), config_map=_foreign(served(build(job).config_map))
    )
    the_plan = plan_for(job, observed)
    assert the_plan.actions == ()
    assert the_plan.conflicts[0].message == (
        'Resource "test-config" of Kind "ConfigMap" already exists and is not managed by MPIJob'
    )


@pytest.mark.parametrize(
    "implementation", ["OpenMPI", "Intel"], ids=["worker-service", "launcher-service"]
)
def test_worker_service_not_controlled_by_us(implementation: str) -> None:
    """Also TestLauncherServiceNotControlledByUs (Intel): one Service fronts launcher and
    workers."""
    job = make_job(workers=2, mpiImplementation=implementation)
    observed = converged(job)
    observed = Observed(**{**observed.__dict__, "service": _foreign(observed.service)})  # type: ignore[arg-type]
    the_plan = plan_for(job, observed)
    assert the_plan.actions == ()
    assert [str(c.ref) for c in the_plan.conflicts] == ["Service default/test"]


def test_secret_not_controlled_by_us() -> None:
    job = make_job(workers=64)
    desired = build(job)
    observed = Observed(
        service=served(desired.service),
        config_map=served(desired.config_map),
        secret=_foreign(served(desired.secret)),  # type: ignore[arg-type]
    )
    the_plan = plan_for(job, observed)
    assert the_plan.actions == ()
    assert [str(c.ref) for c in the_plan.conflicts] == ["Secret default/test-ssh"]


def test_foreign_secret_with_the_wrong_keys_is_still_only_a_conflict() -> None:
    job = make_job(workers=1)
    secret = _foreign(served(build(job).secret))  # type: ignore[arg-type]
    secret["data"] = {"other": "eA=="}
    the_plan = plan_for(job, Observed(secret=secret))
    assert steps(the_plan) == [
        "create Service default/test",
        "create ConfigMap default/test-config",
    ]
    assert [str(c.ref) for c in the_plan.conflicts] == ["Secret default/test-ssh"]


def test_worker_not_controlled_by_us() -> None:
    job = make_job(workers=8)
    pods = [_foreign(pod) for pod in workers(job, 8)]
    observed = converged(job, worker_pods=pods)
    observed = Observed(**{**observed.__dict__, "launcher_job": None, "launcher_pods": ()})
    the_plan = plan_for(job, observed)
    assert the_plan.actions == ()
    assert [str(c.ref) for c in the_plan.conflicts] == ["Pod default/test-worker-0"]
    assert the_plan.conflicts[0].message == (
        'Resource "test-worker-0" of Kind "Pod" already exists and is not managed by MPIJob'
    )


def test_worker_owned_by_another_job_stops_creation_there() -> None:
    job = make_job(workers=3, launcherCreationPolicy="AtStartup")
    pods = workers(job, 3)
    pods[1]["metadata"]["ownerReferences"][0]["uid"] = "another-mpijob"
    observed = Observed(worker_pods=(pods[1],))
    the_plan = plan_for(job, observed)
    assert steps(the_plan)[-1] == "create Pod default/test-worker-0"
    assert [str(c.ref) for c in the_plan.conflicts] == ["Pod default/test-worker-1"]


def test_pod_group_not_controlled_by_us() -> None:
    job = make_job(workers=1)
    observed = converged(job, gang="scheduler-plugins")
    observed = Observed(**{**observed.__dict__, "pod_group": _foreign(observed.pod_group)})  # type: ignore[arg-type]
    the_plan = plan_for(job, observed, gang="scheduler-plugins")
    assert the_plan.actions == ()
    assert the_plan.conflicts[0].message == (
        'Resource "test" of Kind "PodGroup" already exists and is not managed by MPIJob'
    )


def test_foreign_worker_blocks_finish_cleanup_after_earlier_deletes() -> None:
    """Upstream's deleteWorkerPods deletes in index order and errors at the first foreign pod."""
    status = {"conditions": [{"type": "Succeeded", "status": "True"}], "completionTime": EARLIER}
    job = make_job(workers=3, runPolicy={"cleanPodPolicy": "All"}, status=status)
    pods = workers(job, 3)
    _foreign(pods[1])
    the_plan = plan_for(job, converged(job, worker_pods=pods))
    assert [a.ref.name for a in the_plan.actions if isinstance(a, Delete)] == ["test-worker-0"]
    assert [str(c.ref) for c in the_plan.conflicts] == ["Pod default/test-worker-1"]
