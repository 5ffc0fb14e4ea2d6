"""Gang scheduling as data: a group placed together, the minResources gap, the groups pods name,
and the PodGroup phases of both schedulers."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.scheduling import gang
from kubesim.scheduling.filters import NodeInfo
from kubesim.scheduling.gang import Counts, Member


def nodes(*free_cpu: int) -> list[NodeInfo]:
    return [
        NodeInfo(f"n{i}", allocatable={"cpu": cpu, "memory": 1 << 30, "pods": 10})
        for i, cpu in enumerate(free_cpu)
    ]


def member(name: str, cpu: int) -> Member:
    return Member(name, {}, {"cpu": cpu}, {"cpu": cpu, "memory": 1})


@pytest.mark.parametrize(
    ("free", "wanted", "placed"),
    [
        ((4000, 4000), [2000] * 4, 4),
        ((4000, 4000), [2000] * 5, 4),
        ((4000, 2000), [3000, 3000], 1),
        ((1000,), [2000], 0),
    ],
    ids=["exact", "one-too-many", "fragmented", "none"],
)
def test_members_are_placed_one_after_another(
    free: tuple[int, ...], wanted: list[int], placed: int
) -> None:
    members = [member(f"p{i}", cpu) for i, cpu in enumerate(wanted)]
    infos = nodes(*free)
    got, failed = gang.place(members, infos)
    assert len(got) == placed
    assert len(failed) == len(wanted) - placed
    assert all(info.requested == {} for info in infos)  # the caller's nodes are left alone


def test_placement_spreads_as_the_score_does() -> None:
    got, _ = gang.place([member(f"p{i}", 1000) for i in range(4)], nodes(4000, 4000))
    assert list(got.values()) == ["n0", "n1", "n0", "n1"]


@pytest.mark.parametrize(
    ("min_resources", "min_member", "gap"),
    [
        ({"cpu": 8000}, 2, {}),
        ({"cpu": 9000}, 2, {"cpu": 1000}),
        ({"nvidia.com/gpu": 1}, 1, {"nvidia.com/gpu": 1}),
        ({}, 25, {"pods": 5}),
    ],
)
def test_resource_gap(min_resources: dict[str, int], min_member: int, gap: dict[str, int]) -> None:
    assert gang.resource_gap(min_resources, min_member, nodes(4000, 4000)) == gap


def test_an_unlimited_node_leaves_no_gap() -> None:
    infos = [NodeInfo("big", unlimited=True)]
    assert gang.resource_gap({"cpu": 10**9}, 1000, infos) == {}


@pytest.mark.parametrize(
    ("pod", "group"),
    [
        (
            {
                "metadata": {"namespace": "ns", "labels": {gang.POD_GROUP_LABEL: "g"}},
                "spec": {"schedulerName": "scheduler-plugins-scheduler"},
            },
            ("coscheduling", "ns", "g"),
        ),
        (
            {
                "metadata": {
                    "namespace": "ns",
                    "annotations": {gang.VOLCANO_GROUP_ANNOTATION: "g"},
                },
                "spec": {"schedulerName": "volcano"},
            },
            ("volcano", "ns", "g"),
        ),
        (
            {"metadata": {"labels": {gang.POD_GROUP_LABEL: "g"}}, "spec": {"schedulerName": "x"}},
            None,
        ),
        ({"metadata": {}, "spec": {"schedulerName": "volcano"}}, None),
    ],
    ids=["coscheduling", "volcano", "other-scheduler", "no-group"],
)
def test_group_of(pod: dict[str, Any], group: tuple[str, str, str] | None) -> None:
    assert gang.group_of(pod) == group


def c(pods: int, running: int = 0, succeeded: int = 0, failed: int = 0) -> Counts:
    return Counts(pods, running, succeeded, failed, scheduled=running + succeeded + failed)


@pytest.mark.parametrize(
    ("phase", "seen", "expected"),
    [
        ("", c(0), "Pending"),
        ("Pending", c(2), "Pending"),
        ("Pending", c(3), "Scheduling"),
        ("Scheduling", c(3, running=2), "Scheduling"),
        ("Scheduling", c(3, running=3), "Running"),
        ("Running", c(3, running=1, succeeded=2), "Running"),
        ("Running", c(3, running=2, failed=1), "Failed"),
        ("Running", c(3, succeeded=3), "Finished"),
        ("Running", c(2, running=2), "Pending"),
        ("Finished", c(0), "Finished"),
    ],
)
def test_coscheduling_phase(phase: str, seen: Counts, expected: str) -> None:
    assert gang.coscheduling_phase(phase, 3, seen) == expected


@pytest.mark.parametrize(
    ("phase", "seen", "admitted", "expected"),
    [
        ("", c(3), False, "Pending"),
        ("Pending", c(3), True, "Inqueue"),
        ("Inqueue", c(3, running=2), False, "Inqueue"),
        ("Inqueue", c(3, running=3), False, "Running"),
        ("Running", c(3, running=2, failed=1), False, "Unknown"),
        ("Running", c(3, succeeded=3), False, "Completed"),
    ],
)
def test_volcano_phase(phase: str, seen: Counts, admitted: bool, expected: str) -> None:
    assert gang.volcano_phase(phase, 3, seen, admitted) == expected


def test_counts() -> None:
    pods = [
        {"spec": {"nodeName": "n"}, "status": {"phase": "Running"}},
        {"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}},
        {"spec": {}, "status": {"phase": "Pending"}},
    ]
    assert gang.counts(pods) == Counts(pods=3, running=1, succeeded=1, failed=0, scheduled=2)
