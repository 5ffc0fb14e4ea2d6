"""The planner keeps the workers' PodDisruptionBudget: created before the workers, updated on a
`minReplicas` edit, deleted when the job opts out, is suspended or finishes; never adopted."""

from __future__ import annotations

import dataclasses
from typing import Any

from mpi_operator.desired import naming
from mpi_operator.planning import Observed

from .factory import (
    EARLIER,
    converged,
    launcher_job,
    make_job,
    plan_for,
    served,
    steps,
    with_spec,
)

ELASTIC = {"minReplicas": 1, "maxReplicas": 4}


def budget_steps(job: Any, observed: Any) -> list[str]:
    return [s for s in steps(plan_for(job, observed)) if "PodDisruptionBudget" in s]


def test_a_new_elastic_job_gets_its_budget_before_its_workers() -> None:
    job = make_job("pi", workers=2, elasticPolicy=ELASTIC)
    described = steps(plan_for(job, Observed()))
    budget = next(i for i, s in enumerate(described) if "PodDisruptionBudget" in s)
    first_worker = next(i for i, s in enumerate(described) if "Pod default/pi-worker" in s)
    assert budget < first_worker, described


def test_a_converged_budget_plans_nothing() -> None:
    job = make_job("pi", workers=2, elasticPolicy=ELASTIC)
    assert plan_for(job, converged(job)).actions == ()


def test_a_min_replicas_edit_updates_the_floor() -> None:
    job = make_job("pi", workers=3, elasticPolicy=ELASTIC)
    observed = converged(job)
    edited = with_spec(job, elasticPolicy={"minReplicas": 2})
    assert budget_steps(edited, observed) == [
        "update PodDisruptionBudget default/pi-workers (spec.minAvailable)"
    ]


def test_opting_out_deletes_the_budget() -> None:
    job = make_job("pi", workers=2, elasticPolicy=ELASTIC)
    observed = converged(job)
    assert budget_steps(with_spec(job, disruptionBudgetPolicy="Never"), observed) == [
        "delete PodDisruptionBudget default/pi-workers"
    ]


def test_a_static_job_opting_in_gets_one_for_every_worker() -> None:
    job = make_job("pi", workers=3)
    observed = converged(job)
    opted = with_spec(job, disruptionBudgetPolicy="Always")
    (create,) = [
        a for a in plan_for(opted, observed).actions if a.ref.kind == "PodDisruptionBudget"
    ]
    assert create.obj["spec"]["minAvailable"] == 3  # type: ignore[attr-defined]


def test_a_finished_job_loses_its_budget() -> None:
    status = {
        "completionTime": EARLIER,
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"}],
    }
    job = make_job("pi", workers=2, elasticPolicy=ELASTIC, status=status)
    observed = converged(job, launcher=launcher_job(job, condition="Complete"))
    assert budget_steps(job, observed) == ["delete PodDisruptionBudget default/pi-workers"]


def test_a_budget_it_does_not_control_is_left_alone_when_none_is_wanted() -> None:
    job = make_job("pi", workers=2)
    theirs = served(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": naming.pdb_name(job), "namespace": "default"},
            "spec": {"minAvailable": 1},
        }
    )
    observed = dataclasses.replace(converged(job), pdb=theirs)
    assert budget_steps(job, observed) == []


def test_suspending_deletes_the_budget_and_resuming_brings_it_back() -> None:
    job = make_job("pi", workers=2, elasticPolicy=ELASTIC)
    observed = converged(job)
    suspended = with_spec(job, runPolicy={"suspend": True})
    assert budget_steps(suspended, observed) == ["delete PodDisruptionBudget default/pi-workers"]
    resumed = with_spec(suspended, runPolicy={"suspend": False})
    gone = dataclasses.replace(observed, pdb=None)
    assert budget_steps(resumed, gone) == ["create PodDisruptionBudget default/pi-workers"]
