"""The workers' PodDisruptionBudget: who gets one (`disruptionBudgetPolicy`) and its floor."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.desired import pdb

from ..planning.factory import make_job

ELASTIC = {"minReplicas": 2, "maxReplicas": 6}


@pytest.mark.parametrize(
    ("spec", "floor"),
    [
        ({"elasticPolicy": ELASTIC}, 2),
        ({"elasticPolicy": ELASTIC, "disruptionBudgetPolicy": "Auto"}, 2),
        ({"elasticPolicy": ELASTIC, "disruptionBudgetPolicy": "Always"}, 2),
        ({"elasticPolicy": ELASTIC, "disruptionBudgetPolicy": "Never"}, None),
        ({}, None),
        ({"disruptionBudgetPolicy": "Always"}, 4),
        ({"disruptionBudgetPolicy": "Never"}, None),
        ({"elasticPolicy": ELASTIC, "runPolicy": {"suspend": True}}, None),
        ({"disruptionBudgetPolicy": "Always", "runPolicy": {"suspend": True}}, None),
    ],
    ids=[
        "elastic",
        "elastic-auto",
        "elastic-always",
        "elastic-opted-out",
        "static",
        "static-opted-in",
        "static-never",
        "elastic-suspended",
        "static-suspended",
    ],
)
def test_who_gets_a_budget_and_its_floor(spec: dict[str, Any], floor: int | None) -> None:
    job = make_job("pi", workers=4, **spec)
    assert pdb.min_available(job) == floor
    built = pdb.build_pdb(job)
    assert (built["spec"]["minAvailable"] if built is not None else None) == floor


def test_a_launcher_only_job_gets_none() -> None:
    assert pdb.build_pdb(make_job("pi", workers=None, disruptionBudgetPolicy="Always")) is None


def test_the_budget_selects_the_workers_and_is_owned_by_the_job() -> None:
    built = pdb.build_pdb(make_job("pi", workers=4, elasticPolicy=ELASTIC))
    assert built is not None
    assert built["apiVersion"] == "policy/v1"
    assert built["kind"] == "PodDisruptionBudget"
    assert built["metadata"]["name"] == "pi-workers"
    assert built["metadata"]["namespace"] == "default"
    (owner,) = built["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("MPIJob", "pi", True)
    assert built["spec"] == {
        "minAvailable": 2,
        "selector": {
            "matchLabels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "worker",
            }
        },
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
