"""PodDisruptionBudget logic as functions of data (`kubesim.pdb`): selection, status, the eviction
check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubesim import pdb
from kubesim.errors import StatusError

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def _pod(name: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": "a"}}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


def _budget(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "b", "generation": 1}, "spec": spec, "status": status or {}}


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "a"}}, True),
        ({"matchLabels": {"app": "b"}}, False),
    ],
)
def test_selection(selector: dict[str, Any] | None, selected: bool) -> None:
    assert pdb.selects({"spec": {"selector": selector}}, {"app": "a"}) is selected


@pytest.mark.parametrize(
    ("spec", "pods", "scale", "expected"),
    [
        ({"minAvailable": 2}, 3, 10, (3, 2)),
        ({"minAvailable": "50%"}, 3, 5, (5, 3)),  # rounds up
        ({"maxUnavailable": 1}, 3, 4, (4, 3)),
        ({"maxUnavailable": "25%"}, 3, 4, (4, 3)),
        ({"maxUnavailable": 9}, 3, 4, (4, 0)),
    ],
)
def test_expected_and_desired(
    spec: dict[str, Any], pods: int, scale: int, expected: tuple[int, int]
) -> None:
    assert pdb.desired_healthy(spec, pods, scale) == expected


def test_status_counts_ready_pods_not_deleting_nor_disrupted() -> None:
    pods = {
        "a": _pod("a"),
        "b": _pod("b", ready=False),
        "c": _pod("c", deleting=True),
        "d": _pod("d"),
        "e": _pod("e"),
    }
    disrupted = {
        "d": "2025-01-01T11:59:00Z",
        "gone": "2025-01-01T11:59:00Z",
        "old": "2025-01-01T11:00:00Z",
    }
    pods["old"] = _pod("old")
    status = pdb.budget_status(_budget({"disruptedPods": disrupted}, minAvailable=1), pods, 0, NOW)
    assert status["disruptedPods"] == {"d": "2025-01-01T11:59:00Z"}
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (3, 1, 6)
    assert status["disruptionsAllowed"] == 2
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("DisruptionAllowed", "True", "SufficientPods")
    ]
    assert pdb.next_expiry(status["disruptedPods"]) == NOW + timedelta(minutes=1)


def test_no_pods_expected_allows_nothing() -> None:
    status = pdb.budget_status(_budget(maxUnavailable=1), {}, 0, NOW)
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"


def test_an_allowed_eviction_spends_the_budget_and_records_the_pod() -> None:
    status = {
        "observedGeneration": 1,
        "disruptionsAllowed": 1,
        "currentHealthy": 3,
        "desiredHealthy": 2,
    }
    after = pdb.check_and_decrement(_budget(status), "p", NOW)
    assert after["disruptionsAllowed"] == 0
    assert after["disruptedPods"] == {"p": "2025-01-01T12:00:00Z"}
    assert after["conditions"][0]["reason"] == "InsufficientPods"


@pytest.mark.parametrize(
    ("status", "code", "cause"),
    [
        (
            {
                "observedGeneration": 1,
                "disruptionsAllowed": 0,
                "currentHealthy": 2,
                "desiredHealthy": 2,
            },
            429,
            "The disruption budget b needs 2 healthy pods and has 2 currently",
        ),
        (
            {"observedGeneration": 0, "disruptionsAllowed": 1},
            429,
            "The disruption budget b is still being processed by the server.",
        ),
        ({"observedGeneration": 1, "disruptionsAllowed": -1}, 403, None),
    ],
)
def test_refused_evictions(status: dict[str, Any], code: int, cause: str | None) -> None:
    with pytest.raises(StatusError) as refused:
        pdb.check_and_decrement(_budget(status), "p", NOW)
    assert refused.value.code == code
    if cause is not None:
        assert refused.value.message == pdb.BUDGET_VIOLATION
        assert refused.value.causes == [{"reason": "DisruptionBudget", "message": cause}]
