"""Defaults that depend on other fields: the effective slots of the workers and of the launcher.

Static defaults (upstream `SetDefaults_MPIJob`) are pydantic field defaults in `models.py`, applied
when a manifest is parsed. `slotsPerWorker` is the exception: upstream defaults it to 1, we default
it to the GPUs each worker requests when it requests any, else 1. The field therefore stays unset
(None) in the object, in the schema and after `normalize()`, so that "unset" can still be told from
"1" (the launcher's own slots depend on it); readers ask `slots_per_worker(spec)` for the effective
value.
"""

from __future__ import annotations

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJobSpec
from mpi_operator.api.quantities import pod_gpus


def default_slots_per_worker(spec: MPIJobSpec) -> int:
    """GPUs per worker when the workers request GPUs, else upstream's 1."""
    worker = spec.mpi_replica_specs.worker
    gpus = pod_gpus(worker.template) if worker is not None else 0
    return gpus if gpus > 0 else c.DEFAULT_SLOTS_PER_WORKER


def slots_per_worker(spec: MPIJobSpec) -> int:
    """The effective MPI slots of each worker: the field when set, else
    `default_slots_per_worker`."""
    if spec.slots_per_worker is not None:
        return spec.slots_per_worker
    return default_slots_per_worker(spec)


def launcher_slots(spec: MPIJobSpec) -> int:
    """Slots of the launcher when it runs as a worker.

    Upstream gives it `slotsPerWorker` like every worker, and so do we when the field is set. When
    it is derived from the workers' GPUs, a launcher without GPUs must not get that many processes:
    it gets its own GPU count, else 1.
    """
    if spec.slots_per_worker is not None:
        return spec.slots_per_worker
    return pod_gpus(spec.mpi_replica_specs.launcher.template) or c.DEFAULT_SLOTS_PER_WORKER
