"""The MPIJob API (pure, no I/O): canonical models, legacy mapping, defaults and validation.

Import the names below from here; the submodules own them: `models` (pydantic v2beta1 MPIJob),
`legacy` (v1/v1alpha2/v1alpha1 fields and the superset schema), `normalize` (any served version ->
canonical job), `defaults` (the effective slots), `quantities` (resource quantities and GPUs),
`validation`, `elastic` (bounds inferred from horovodrun), `manifests` (the `mpi-operator validate`
command), `constants`.
"""

from mpi_operator.api.legacy import ServedMPIJob
from mpi_operator.api.models import (
    ElasticPolicy,
    JobCondition,
    LauncherReplicaSpec,
    MPIJob,
    MPIJobSpec,
    MPIJobStatus,
    MPIReplicaSpecs,
    ReplicaSpec,
    ReplicaStatus,
    ReplicaStatuses,
    RunPolicy,
    SchedulingPolicy,
    WorkerReplicaSpec,
)
from mpi_operator.api.normalize import Normalized, normalize, parse_and_validate, to_canonical_dict
from mpi_operator.api.validation import FieldError, InvalidMPIJob, LegacyNote, validate

__all__ = [
    "ElasticPolicy",
    "FieldError",
    "InvalidMPIJob",
    "JobCondition",
    "LauncherReplicaSpec",
    "LegacyNote",
    "MPIJob",
    "MPIJobSpec",
    "MPIJobStatus",
    "MPIReplicaSpecs",
    "Normalized",
    "ReplicaSpec",
    "ReplicaStatus",
    "ReplicaStatuses",
    "RunPolicy",
    "SchedulingPolicy",
    "ServedMPIJob",
    "WorkerReplicaSpec",
    "normalize",
    "parse_and_validate",
    "to_canonical_dict",
    "validate",
]
