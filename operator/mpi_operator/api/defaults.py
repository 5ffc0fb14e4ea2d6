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
from mpi_operator.api.resources import is_gpu_resource, pod_gpus

__all__ = [
    "container_resource",
    "default_slots_per_worker",
    "is_gpu_resource",
    "pod_gpus",
    "slots_per_worker",
]


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
