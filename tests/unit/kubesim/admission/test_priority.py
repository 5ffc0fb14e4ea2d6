"""The Priority admission plugin's resolution, as functions of data
(`kubesim.admission.priority`)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.admission.priority import (
    PriorityRefusal,
    admit_pod_create,
    admit_pod_update,
    check_global_default,
    default_class,
)


def _pc(
    name: str, value: int, *, default: bool = False, policy: str | None = None
) -> dict[str, Any]:
    pc: dict[str, Any] = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    if policy is not None:
        pc["preemptionPolicy"] = policy
    return pc


def _classes(*pcs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {pc["metadata"]["name"]: pc for pc in pcs}


SYSTEM = _pc("system-node-critical", 2000001000, policy="PreemptLowerPriority")
HIGH = _pc("high", 1000, policy="PreemptLowerPriority")
BATCH = _pc("batch", 10, default=True, policy="Never")
LOWER_DEFAULT = _pc("lower", 5, default=True, policy="PreemptLowerPriority")


@pytest.mark.parametrize(
    ("spec", "classes", "expected"),
    [
        ({}, _classes(SYSTEM), {"priority": 0, "preemptionPolicy": "PreemptLowerPriority"}),
        (
            {"priorityClassName": "high"},
            _classes(SYSTEM, HIGH),
            {
                "priorityClassName": "high",
                "priority": 1000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        ),
        (
            {"priorityClassName": "system-node-critical"},
            _classes(SYSTEM),
            {
                "priorityClassName": "system-node-critical",
                "priority": 2000001000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        ),
        # No class: the globalDefault one, named on the pod, with its policy.
        (
            {},
            _classes(HIGH, BATCH),
            {"priorityClassName": "batch", "priority": 10, "preemptionPolicy": "Never"},
        ),
        # Several defaults (a race): the lowest value wins.
        (
            {},
            _classes(BATCH, LOWER_DEFAULT),
            {
                "priorityClassName": "lower",
                "priority": 5,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        ),
        # A value or policy equal to the computed one is accepted.
        (
            {
                "priorityClassName": "high",
                "priority": 1000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
            _classes(HIGH),
            {
                "priorityClassName": "high",
                "priority": 1000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        ),
    ],
)
def test_a_new_pod_gets_its_class_priority(
    spec: dict[str, Any], classes: dict[str, dict[str, Any]], expected: dict[str, Any]
) -> None:
    admit_pod_create(spec, classes)
    assert spec == expected


@pytest.mark.parametrize(
    ("spec", "classes", "message"),
    [
        (
            {"priorityClassName": "nope"},
            _classes(HIGH),
            "no PriorityClass with name nope was found",
        ),
        (
            {"priority": 7},
            _classes(HIGH),
            "the integer value of priority (7) must not be provided in pod spec; priority "
            "admission "
            "controller computed 0 from the given PriorityClass name",
        ),
        (
            {"priorityClassName": "batch", "preemptionPolicy": "PreemptLowerPriority"},
            _classes(BATCH),
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in "
            "pod spec; "
            "priority admission controller computed Never from the given PriorityClass name",
        ),
    ],
)
def test_a_pod_is_refused_as_the_plugin_refuses_it(
    spec: dict[str, Any], classes: dict[str, dict[str, Any]], message: str
) -> None:
    with pytest.raises(PriorityRefusal) as refused:
        admit_pod_create(spec, classes)
    assert str(refused.value) == message


def test_an_update_keeps_the_stored_priority_it_omits() -> None:
    spec: dict[str, Any] = {"containers": []}
    admit_pod_update(spec, {"priority": 10, "preemptionPolicy": "Never"})
    assert spec == {"containers": [], "priority": 10, "preemptionPolicy": "Never"}


@pytest.mark.parametrize(
    ("pc", "create", "refused"),
    [
        (_pc("other", 1, default=True), True, True),
        (_pc("other", 1, default=False), True, False),
        (BATCH, False, False),  # the default itself, updated
        (_pc("high", 1000, default=True), False, True),  # another class made default
    ],
)
def test_only_one_class_may_be_the_global_default(
    pc: dict[str, Any], create: bool, refused: bool
) -> None:
    classes = [HIGH, BATCH]
    if refused:
        with pytest.raises(
            PriorityRefusal, match="PriorityClass batch is already marked as default"
        ):
            check_global_default(pc, classes, create=create)
    else:
        check_global_default(pc, classes, create=create)


def test_no_default_class_without_one_marked() -> None:
    assert default_class([HIGH, SYSTEM]) is None
