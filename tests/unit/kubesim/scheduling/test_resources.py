"""What a pod requests of its node: the app containers' sum, the init container peak, sidecars,
overhead."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.scheduling.resources import DEFAULT_MEMORY, DEFAULT_MILLI_CPU, pod_requests


def c(
    cpu: str | None = None, memory: str | None = None, *, sidecar: bool = False, **more: str
) -> dict[str, Any]:
    requests = {k: v for k, v in {"cpu": cpu, "memory": memory, **more}.items() if v is not None}
    container: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"containers": [c("1", "1Gi"), c("500m", "512Mi")]},
            {"cpu": 1500, "memory": 1536 * 2**20},
        ),
        # An init container larger than the app containers sets the request (the max rule).
        ({"initContainers": [c("4")], "containers": [c("1"), c("1")]}, {"cpu": 4000}),
        ({"initContainers": [c("1")], "containers": [c("3")]}, {"cpu": 3000}),
        # A sidecar adds to the app containers and to every init container started after it.
        ({"initContainers": [c("1", sidecar=True), c("3")], "containers": [c("1")]}, {"cpu": 4000}),
        ({"initContainers": [c("1"), c("1", sidecar=True)], "containers": [c("2")]}, {"cpu": 3000}),
        ({"containers": [c("1")], "overhead": {"cpu": "250m"}}, {"cpu": 1250}),
        (
            {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]},
            {"nvidia.com/gpu": 2},
        ),
        (
            {
                "containers": [
                    {"name": "c", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}}
                ]
            },
            {"cpu": 2000, "nvidia.com/gpu": 1},
        ),
        ({"containers": [{"name": "c"}]}, {}),
    ],
    ids=[
        "sum",
        "init-max",
        "app-max",
        "sidecar-then-init",
        "init-then-sidecar",
        "overhead",
        "gpu",
        "limits",
        "none",
    ],
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests(spec) == expected


def test_scoring_counts_an_unset_cpu_or_memory_as_the_defaults() -> None:
    spec = {"containers": [{"name": "c"}, c("2")]}
    assert pod_requests(spec, nonzero=True) == {
        "cpu": DEFAULT_MILLI_CPU + 2000,
        "memory": 2 * DEFAULT_MEMORY,
    }
