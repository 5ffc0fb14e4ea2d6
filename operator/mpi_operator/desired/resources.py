"""Resource inspection of pod templates: GPUs per pod, MPI slots, and resource-list arithmetic.

The operator never rewrites a template's resources (GPUs and every other extended resource pass through
untouched); it only reads them to derive slots (DESIGN.md §5: slots default to the GPUs each worker
requests) and to sum PodGroup `minResources` the way upstream's `addResources` does.

Quantities and GPU counting live in `api.resources`, shared with the API's own defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api import defaults
from mpi_operator.api.models import MPIJob
from mpi_operator.api.resources import (
    Quantity,
    ResourceList,
    container_gpus,
    is_gpu_resource,
    pod_containers,
    pod_gpus,
)

__all__ = [
    "Quantity",
    "ResourceList",
    "add_resources",
    "container_gpus",
    "cpu_and_memory",
    "is_gpu_resource",
    "launcher_gpus",
    "launcher_slots",
    "pod_containers",
    "pod_gpus",
    "render_resource_list",
    "requests_gpus",
    "slots_per_worker",
    "worker_gpus",
]


def add_resources(total: ResourceList, resources: Mapping[str, Any], replicas: int) -> ResourceList:
    """Upstream `addResources`: `total` plus `replicas` times (requests, falling back to limits per name).

    Returns a new mapping; unparsable quantities are skipped (the API server would refuse the pod).
    """
    merged: dict[str, Any] = {}
    requests = resources.get("requests")
    limits = resources.get("limits")
    if isinstance(requests, Mapping):
        merged.update(requests)
    if isinstance(limits, Mapping):
        for name, value in limits.items():
            merged.setdefault(name, value)
    result = dict(total)
    for name, raw in merged.items():
        try:
            quantity = Quantity.parse(raw) * replicas
        except ValueError:
            continue
        result[name] = result[name] + quantity if name in result else quantity
    return result


def render_resource_list(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """A ResourceList as JSON: name -> canonical quantity string, names sorted."""
    return {name: str(resources[name]) for name in sorted(resources)}


def worker_gpus(job: MPIJob) -> int:
    """GPUs each worker requests (0 without a Worker spec)."""
    return pod_gpus(job.worker.template) if job.worker is not None else 0


def launcher_gpus(job: MPIJob) -> int:
    return pod_gpus(job.launcher.template)


def slots_per_worker(job: MPIJob) -> int:
    """MPI slots of each worker: `slotsPerWorker`, else the GPUs each worker requests, else 1."""
    return defaults.slots_per_worker(job.spec)


def launcher_slots(job: MPIJob) -> int:
    """Slots of the launcher when it runs as a worker.

    Upstream gives it `slotsPerWorker` like every worker, and so do we when the field is set. When it is
    derived from the workers' GPUs, a launcher without GPUs must not get that many processes: it gets
    its own GPU count, else 1.
    """
    if job.spec.slots_per_worker is not None:
        return job.spec.slots_per_worker
    return launcher_gpus(job) or c.DEFAULT_SLOTS_PER_WORKER


def requests_gpus(template: Mapping[str, Any]) -> bool:
    return pod_gpus(template) > 0


def cpu_and_memory(resources: Any) -> dict[str, Any]:
    """Only the `cpu` / `memory` entries of a container's resources (for helper init containers).

    Copying them satisfies a ResourceQuota that demands limits without raising the pod's effective
    request (the max over init containers never exceeds the sum over app containers that has them);
    extended resources such as GPUs are left out so no device is allocated to a helper.
    """
    if not isinstance(resources, Mapping):
        return {}
    out: dict[str, Any] = {}
    for section in ("requests", "limits"):
        values = resources.get(section)
        if isinstance(values, Mapping):
            kept = {k: v for k, v in values.items() if k in ("cpu", "memory")}
            if kept:
                out[section] = kept
    return out
