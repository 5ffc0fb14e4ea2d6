"""LeastAllocated: the emptier node wins, ties go to the first name."""

from __future__ import annotations

from kubesim.scheduling.filters import NodeInfo
from kubesim.scheduling.score import least_allocated, pick


def node(name: str, cpu_used: int = 0, gpus_used: int = 0) -> NodeInfo:
    return NodeInfo(
        name=name,
        allocatable={"cpu": 4000, "memory": 4000, "nvidia.com/gpu": 4},
        scored={"cpu": cpu_used, "memory": 0, "nvidia.com/gpu": gpus_used},
    )


def test_least_allocated_scores_the_free_share_after_placing_the_pod() -> None:
    assert least_allocated({"cpu": 1000, "memory": 1000}, node("a")) == 75
    assert least_allocated({"cpu": 1000, "memory": 1000}, node("a", cpu_used=2000)) == 50


def test_extended_resources_the_pod_requests_count_too() -> None:
    wants = {"cpu": 100, "memory": 100, "nvidia.com/gpu": 1}
    assert pick(wants, [node("a", gpus_used=2), node("b")]).name == "b"


def test_ties_go_to_the_first_name_whatever_the_order() -> None:
    wants = {"cpu": 100, "memory": 100}
    assert pick(wants, [node("c"), node("b"), node("a", cpu_used=100)]).name == "b"
