"""api.quantities and api.defaults: quantities in Go's canonical form, GPUs per pod and the slots
derived from them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.api import defaults, quantities
from mpi_operator.api.quantities import Quantity

from .factory import container, make_job, template


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        (2, "2"),
        ("20", "20"),
        ("22000", "22k"),
        ("1500", "1500"),
        ("0.5", "500m"),
        ("500m", "500m"),
        ("1.5", "1500m"),
        ("65Gi", "65Gi"),
        ("1536Mi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("512Ki", "512Ki"),
        ("0.5Gi", "512Mi"),
        ("100M", "100M"),
        ("1e3", "1e3"),
        ("0", "0"),
        ("0Gi", "0"),
        ("1n", "1n"),
        ("0.1n", "1n"),
    ],
    ids=lambda v: str(v),
)
def test_quantity_renders_like_go(raw: Any, canonical: str) -> None:
    assert str(Quantity.parse(raw)) == canonical


@pytest.mark.parametrize(
    "raw", ["", "Gi", "1.2.3", "1 Gi", "1gi", True, None, [1], float("inf"), float("nan")], ids=repr
)
def test_quantity_rejects_junk(raw: Any) -> None:
    with pytest.raises(ValueError, match="quantity"):
        Quantity.parse(raw)


@pytest.mark.parametrize(
    ("first", "second", "total"),
    [("20", "2", "22"), ("32Gi", "33Gi", "65Gi"), ("1Gi", "1", "1073741825"), ("0", "1Gi", "1Gi")],
    ids=["cpu", "binary", "binary-plus-decimal", "zero-takes-the-other-format"],
)
def test_sum_keeps_the_first_non_zero_format(first: str, second: str, total: str) -> None:
    assert str(Quantity.parse(first) + Quantity.parse(second)) == total


@pytest.mark.parametrize(
    ("requirements", "replicas", "expected"),
    [
        ({"requests": {"cpu": "2"}}, 3, {"cpu": "6"}),
        ({"limits": {"cpu": "2", "memory": "1Gi"}}, 2, {"cpu": "4", "memory": "2Gi"}),
        (
            {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "nvidia.com/gpu": 1}},
            4,
            {"cpu": "4", "nvidia.com/gpu": "4"},
        ),
        ({}, 5, {}),
    ],
    ids=["requests", "limits-only", "requests-win-limit-only-names-kept", "empty"],
)
def test_add_resources(
    requirements: dict[str, Any], replicas: int, expected: dict[str, str]
) -> None:
    start: quantities.ResourceList = {}
    total = quantities.add_resources(start, requirements, replicas)
    assert quantities.render_resource_list(total) == expected
    assert start == {}


def _gpu(section: str, name: str, amount: Any) -> dict[str, Any]:
    return container(resources={section: {name: amount}})


@pytest.mark.parametrize(
    ("containers", "gpus"),
    [
        ([_gpu("limits", "nvidia.com/gpu", 4)], 4),
        ([_gpu("limits", "amd.com/gpu", "2")], 2),
        ([_gpu("limits", "gpu.intel.com/i915", 1)], 1),
        ([_gpu("limits", "example.com/gpu", 3)], 3),
        ([_gpu("requests", "nvidia.com/gpu", 2)], 2),
        (
            [
                container(
                    resources={"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 2}}
                )
            ],
            2,
        ),
        ([_gpu("limits", "nvidia.com/gpu", 1), _gpu("limits", "nvidia.com/gpu", 2)], 3),
        ([_gpu("limits", "nvidia.com/gpu", 1), _gpu("limits", "amd.com/gpu", 1)], 2),
        ([_gpu("limits", "example.com/fpga", 2), _gpu("limits", "cpu", 8)], 0),
        ([container()], 0),
    ],
    ids=[
        "nvidia",
        "amd-string",
        "intel",
        "any-com-gpu",
        "requests-only",
        "requests-and-limits-count-once",
        "two-containers",
        "two-vendors",
        "not-gpus",
        "none",
    ],
)
def test_pod_gpus(containers: list[dict[str, Any]], gpus: int) -> None:
    assert quantities.pod_gpus(template(*containers)) == gpus


def test_init_containers_do_not_count() -> None:
    tmpl = template(container(), initContainers=[_gpu("limits", "nvidia.com/gpu", 8)])
    assert quantities.pod_gpus(tmpl) == 0


@pytest.mark.parametrize(
    ("spec", "worker_gpus", "launcher_gpus", "slots", "launcher_slots"),
    [
        ({}, 0, 0, 1, 1),
        ({}, 4, 0, 4, 1),
        ({}, 4, 2, 4, 2),
        ({"slotsPerWorker": 2}, 4, 0, 2, 2),
        ({"slotsPerWorker": 0}, 4, 0, 0, 0),
    ],
    ids=["no-gpus", "from-worker-gpus", "launcher-own-gpus", "explicit", "explicit-zero"],
)
def test_slots(
    spec: dict[str, Any], worker_gpus: int, launcher_gpus: int, slots: int, launcher_slots: int
) -> None:
    job = make_job(
        worker_template=template(_gpu("limits", "nvidia.com/gpu", worker_gpus)),
        launcher_template=template(_gpu("limits", "nvidia.com/gpu", launcher_gpus)),
        runLauncherAsWorker=True,
        **spec,
    )
    assert defaults.slots_per_worker(job.spec) == slots
    assert defaults.launcher_slots(job.spec) == launcher_slots


def test_cpu_and_memory_drops_everything_else() -> None:
    requirements = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1},
        "limits": {"nvidia.com/gpu": 1},
    }
    assert quantities.cpu_and_memory(requirements) == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert quantities.cpu_and_memory(None) == {}


@given(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "n", "u"]),
)
def test_canonical_form_parses_back_to_the_same_amount(number: int, suffix: str) -> None:
    quantity = Quantity.parse(f"{number}{suffix}")
    assert Quantity.parse(str(quantity)).value == quantity.value
