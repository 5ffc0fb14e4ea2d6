"""Defaults that depend on other fields: the effective `slotsPerWorker` (DESIGN.md §5).

Static defaults (upstream `SetDefaults_MPIJob`) are pydantic field defaults in `models.py`, applied when
a manifest is parsed. `slotsPerWorker` is the exception: upstream defaults it to 1, we default it to the
GPUs each worker requests when it requests any, else 1. The field therefore stays unset (None) in the
object, in the schema and after `normalize()`, so that "unset" can still be told from "1" (the launcher's
own slots depend on it); readers ask `slots_per_worker(spec)` for the effective value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJobSpec


def is_gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu`, `amd.com/gpu`, `gpu.intel.com/i915`: upstream v1's `isGPULauncher` test."""
    return "gpu" in name


def whole_quantity(value: Any) -> int | None:
    """An integer resource quantity (`8`, `"8"`); None for fractions, suffixes and junk."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def container_resource(container: Mapping[str, Any], resource: str) -> int | None:
    """A container's whole-number limit (else request) for `resource`, None when it names none."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, Mapping) and resource in values:
            return whole_quantity(values[resource])
    return None


def _containers(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list):
        return []
    return [x for x in containers if isinstance(x, Mapping)]


def pod_gpus(template: Mapping[str, Any]) -> int:
    """GPUs one pod of this template requests: GPU limits (else requests) summed over its containers."""
    total = 0
    for container in _containers(template):
        resources = container.get("resources")
        if not isinstance(resources, Mapping):
            continue
        names: set[str] = set()
        for section in ("limits", "requests"):
            values = resources.get(section)
            if isinstance(values, Mapping):
                names.update(str(k) for k in values if is_gpu_resource(str(k)))
        total += sum(container_resource(container, name) or 0 for name in names)
    return total


def default_slots_per_worker(spec: MPIJobSpec) -> int:
    """GPUs per worker when the workers request GPUs, else upstream's 1."""
    worker = spec.mpi_replica_specs.worker
    gpus = pod_gpus(worker.template) if worker is not None else 0
    return gpus if gpus > 0 else c.DEFAULT_SLOTS_PER_WORKER


def slots_per_worker(spec: MPIJobSpec) -> int:
    """The effective slots per worker: the field when set, else `default_slots_per_worker`."""
    if spec.slots_per_worker is not None:
        return spec.slots_per_worker
    return default_slots_per_worker(spec)
