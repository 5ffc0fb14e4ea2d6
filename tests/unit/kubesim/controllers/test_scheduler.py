"""The scheduler's pure parts: back-off, which pods it takes, the message of an unschedulable
pod."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.scheduler import backoff_seconds, unschedulable_message, wants_scheduling
from kubesim.scheduling.filters import Failure


def test_back_off_doubles_from_one_second_to_ten() -> None:
    assert [backoff_seconds(n) for n in range(7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("pod", "wanted"),
    [
        ({"spec": {}}, True),
        ({"spec": {"schedulerName": "default-scheduler"}}, True),
        ({"spec": {"schedulerName": "volcano"}}, False),
        ({"spec": {"nodeName": "n"}}, False),
        ({"spec": {}, "status": {"phase": "Failed"}}, False),
        ({"spec": {}, "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}, False),
    ],
)
def test_wants_scheduling(pod: dict[str, Any], wanted: bool) -> None:
    assert wants_scheduling(pod) is wanted


def test_messages_for_no_nodes_and_for_a_pod_that_never_preempts() -> None:
    assert unschedulable_message({}, 0, {}) == "no nodes available to schedule pods"
    failures = {"n": Failure(("Insufficient cpu",), resolvable=True)}
    pod = {"spec": {"preemptionPolicy": "Never"}}
    assert unschedulable_message(pod, 1, failures) == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never."
    )
