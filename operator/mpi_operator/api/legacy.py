"""Legacy MPIJob shapes (kubeflow.org v1, v1alpha2, v1alpha1) and their mapping onto canonical
v2beta1.

The CRD serves every version through one superset schema with conversion `None`, so the API server
stores legacy fields as written and the operator, which reads v2beta1, sees them under any
apiVersion. The mapping is therefore driven by which fields are present, never by apiVersion (that
only adds deprecation notes, which `mpi-operator validate` can show but the operator cannot know).

`LegacySpecFields` documents the legacy fields for the superset CRD schema (`ServedMPIJob`);
`convert_legacy_fields` rewrites a private plain-dict copy of a manifest in place.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError

from mpi_operator.api import constants as c
from mpi_operator.api.models import ApiModel, MPIJob, MPIJobSpec, MPIReplicaSpecs, optional_field
from mpi_operator.api.quantities import container_resource, is_gpu_resource
from mpi_operator.api.validation import (
    FieldError,
    LegacyNote,
    errors_from_pydantic,
    too_many_workers,
)

MPIDistribution = Literal["OpenMPI", "IntelMPI", "MPICH", "open_mpi", "intel_mpi", "mpich"]
MPI_DISTRIBUTIONS: dict[str, c.MPIImplementation] = {
    "OpenMPI": "OpenMPI",
    "open_mpi": "OpenMPI",
    "IntelMPI": "Intel",
    "intel_mpi": "Intel",
    "MPICH": "MPICH",
    "mpich": "MPICH",
}
SSHD_COMMAND = ("/usr/sbin/sshd", "-De")
_MASTER_ROLES = ("node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane")


class LegacySpecFields(ApiModel):
    """Deprecated spec fields of v1alpha1, v1alpha2 and v1, mapped onto v2beta1 by the operator."""

    gpus: int | None = optional_field(
        "Deprecated (v1alpha1): total GPUs; split into workers of gpusPerNode GPUs each, at most "
        f"{c.MAX_WORKER_REPLICAS} of them (checked by the operator: the split depends on its "
        "--gpus-per-node).",
        ge=1,
    )
    gpus_per_node: int | None = optional_field(
        "Deprecated (v1alpha1): GPUs per worker for spec.gpus; default: the operator's "
        "--gpus-per-node.",
        ge=1,
    )
    processing_units: int | None = optional_field(
        "Deprecated (v1alpha1): total processing units of processingResourceType; split like gpus.",
        ge=1,
    )
    processing_units_per_node: int | None = optional_field(
        "Deprecated (v1alpha1): processing units per worker; default: --gpus-per-node for GPUs, "
        "else 1.",
        ge=1,
    )
    processing_resource_type: str | None = optional_field(
        "Deprecated (v1alpha1): resource counted by processingUnits (default nvidia.com/gpu).",
        min_length=1,
    )
    replicas: int | None = optional_field(
        "Deprecated (v1alpha1): number of workers; use mpiReplicaSpecs.Worker.replicas.",
        ge=1,
        maximum=c.MAX_WORKER_REPLICAS,
    )
    template: dict[str, Any] | None = optional_field(
        "Deprecated (v1alpha1): one pod template for the launcher and the workers; use "
        "mpiReplicaSpecs.",
        free_form=True,
        embedded=True,
    )
    launcher_on_master: bool | None = optional_field(
        "Deprecated (v1alpha1, v1alpha2): run the launcher on a control-plane node."
    )
    backoff_limit: int | None = optional_field(
        "Deprecated (v1alpha1 to v1): use runPolicy.backoffLimit.", ge=0, le=c.INT32_MAX
    )
    active_deadline_seconds: int | None = optional_field(
        "Deprecated (v1alpha1 to v1): use runPolicy.activeDeadlineSeconds.", ge=0, le=c.INT64_MAX
    )
    clean_pod_policy: c.CleanPodPolicy | None = optional_field(
        "Deprecated (v1alpha2, v1): use runPolicy.cleanPodPolicy."
    )
    main_container: str | None = optional_field(
        "Deprecated (v1alpha2, v1): name of the MPI container; it is moved to containers[0].",
        min_length=1,
    )
    mpi_distribution: MPIDistribution | None = optional_field(
        "Deprecated (v1alpha2): use mpiImplementation (IntelMPI is now Intel)."
    )


LEGACY_SPEC_KEYS: tuple[str, ...] = tuple(
    str(info.alias) for info in LegacySpecFields.model_fields.values() if info.alias
)
LEGACY_STATUS_KEYS = ("launcherStatus", "workerReplicas")


class ServedMPIJobSpec(MPIJobSpec, LegacySpecFields):
    """The spec schema every served version shares: canonical v2beta1 fields plus the deprecated
    ones."""

    mpi_replica_specs: MPIReplicaSpecs | None = optional_field(  # type: ignore[assignment]
        "The Launcher and Worker replica specs; required unless the v1alpha1 spec.template is used."
    )


class ServedMPIJob(MPIJob):
    """The CRD's superset object schema (all served versions); normalize() maps it to MPIJob."""

    spec: ServedMPIJobSpec = Field(description="Desired state of the job.")


@dataclass
class LegacyConversion:
    """What `convert_legacy_fields` did: notes, warnings, errors at legacy paths, and path
    aliases."""

    notes: list[LegacyNote] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    """(canonical path, legacy path) pairs: errors found under the first are reported under the
    second."""


def convert_legacy_fields(
    obj: dict[str, Any],
    *,
    version: str,
    gpus_per_node: int,
    max_workers: int = c.MAX_WORKER_REPLICAS,
) -> LegacyConversion:
    """Move the legacy fields of `obj` (a private plain-dict copy, changed in place) to canonical
    places.

    `max_workers` bounds the workers a v1alpha1 `gpus` / `processingUnits` split may give."""
    out = LegacyConversion()
    if version in c.LEGACY_VERSIONS:
        out.notes.append(
            LegacyNote(
                f"apiVersion: {c.GROUP}/{version}",
                f"apiVersion: {c.API_VERSION}",
                "deprecated version, served through the v2beta1 schema",
            )
        )
    status = obj.get("status")
    if isinstance(status, dict):
        for key in LEGACY_STATUS_KEYS:
            if status.pop(key, None) is not None:
                out.notes.append(
                    LegacyNote(
                        f"status.{key}", "status.replicaStatuses", "dropped: status is rewritten"
                    )
                )
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    raw = {key: spec.pop(key) for key in LEGACY_SPEC_KEYS if key in spec}
    legacy = _parse(raw, out)
    _move_run_policy(spec, legacy, out)
    _map_distribution(spec, legacy, out)
    _expand_single_template(spec, legacy, out, gpus_per_node, max_workers)
    _apply_launcher_on_master(spec, legacy, out)
    _apply_main_container(spec, legacy, out)
    if version in ("v1", "v1alpha2"):
        _warn_worker_command(spec, version, out)
    return out


def _parse(raw: dict[str, Any], out: LegacyConversion) -> LegacySpecFields:
    # Every legacy field is optional and top-level, so dropping the bad ones always converges.
    for _ in range(len(raw) + 1):
        try:
            return LegacySpecFields.model_validate(raw, by_alias=True, by_name=False)
        except ValidationError as exc:
            out.errors += errors_from_pydantic(exc, prefix=("spec",))
            for error in exc.errors(include_url=False):
                raw.pop(str(error["loc"][0]) if error["loc"] else "", None)
    return LegacySpecFields()


def _move_run_policy(spec: dict[str, Any], legacy: LegacySpecFields, out: LegacyConversion) -> None:
    for key, value in (
        ("cleanPodPolicy", legacy.clean_pod_policy),
        ("backoffLimit", legacy.backoff_limit),
        ("activeDeadlineSeconds", legacy.active_deadline_seconds),
    ):
        if value is None:
            continue
        run_policy = spec.setdefault("runPolicy", {})
        if not isinstance(run_policy, dict):
            continue  # the schema reports spec.runPolicy itself
        if key in run_policy and run_policy[key] != value:
            out.warnings.append(
                f"spec.{key}: {value!r} is ignored: "
                f"spec.runPolicy.{key} ({run_policy[key]!r}) takes precedence"
            )
            out.notes.append(
                LegacyNote(f"spec.{key}", f"spec.runPolicy.{key}", "superseded by runPolicy")
            )
            continue
        run_policy[key] = value
        out.notes.append(LegacyNote(f"spec.{key}: {value}", f"spec.runPolicy.{key}: {value}"))
        out.aliases.append((f"spec.runPolicy.{key}", f"spec.{key}"))


def _map_distribution(
    spec: dict[str, Any], legacy: LegacySpecFields, out: LegacyConversion
) -> None:
    if legacy.mpi_distribution is None:
        return
    implementation = MPI_DISTRIBUTIONS[legacy.mpi_distribution]
    note = LegacyNote(
        f"spec.mpiDistribution: {legacy.mpi_distribution}",
        f"spec.mpiImplementation: {implementation}",
    )
    current = spec.get("mpiImplementation")
    if current is not None and current != implementation:
        out.warnings.append(
            f"spec.mpiDistribution: {legacy.mpi_distribution!r} is ignored: "
            f"spec.mpiImplementation ({current!r}) takes precedence"
        )
        return
    spec["mpiImplementation"] = implementation
    out.notes.append(note)


def _first_container(template: dict[str, Any]) -> dict[str, Any]:
    pod = template.get("spec")
    containers = pod.get("containers") if isinstance(pod, dict) else None
    if isinstance(containers, list) and containers and isinstance(containers[0], dict):
        return containers[0]
    return {}


def _units_per_worker(
    legacy: LegacySpecFields, template: dict[str, Any], gpus_per_node: int, out: LegacyConversion
) -> tuple[int, int, str, bool] | None:
    """(workers, units per worker, resource, explicit in template) for spec.gpus /
    spec.processingUnits."""
    if legacy.gpus is not None:
        total, resource, per_node, path = (
            legacy.gpus,
            c.GPU_RESOURCE,
            legacy.gpus_per_node,
            "spec.gpus",
        )
    elif legacy.processing_units is not None:
        resource = legacy.processing_resource_type or c.DEFAULT_PROCESSING_RESOURCE_TYPE
        total, per_node, path = (
            legacy.processing_units,
            legacy.processing_units_per_node,
            "spec.processingUnits",
        )
    else:
        return None
    explicit = container_resource(_first_container(template), resource)
    # v1alpha1: an explicit limit in the pod template wins over gpusPerNode, which wins over the
    # flag.
    per_node = explicit or per_node or (max(gpus_per_node, 1) if is_gpu_resource(resource) else 1)
    if total < per_node:
        return 1, total, resource, explicit is not None
    if total % per_node:
        out.errors.append(
            FieldError(path, f"must be a multiple of the {per_node} {resource} per worker")
        )
        return None
    return total // per_node, per_node, resource, explicit is not None


def _expand_single_template(
    spec: dict[str, Any],
    legacy: LegacySpecFields,
    out: LegacyConversion,
    gpus_per_node: int,
    max_workers: int,
) -> None:
    """v1alpha1: one `template` + `replicas` (or `gpus` / `processingUnits`) -> Launcher + Worker
    specs."""
    shape = {
        "template": legacy.template,
        "replicas": legacy.replicas,
        "gpus": legacy.gpus,
        "processingUnits": legacy.processing_units,
    }
    present = [key for key, value in shape.items() if value is not None]
    if not present:
        return
    if "mpiReplicaSpecs" in spec:
        for key in present:
            out.errors.append(
                FieldError(f"spec.{key}", "cannot be combined with spec.mpiReplicaSpecs")
            )
        return
    counts = [key for key in ("replicas", "gpus", "processingUnits") if shape[key] is not None]
    if not counts:
        out.errors.append(
            FieldError(
                "spec.replicas",
                "Required value: set spec.replicas, spec.gpus or spec.processingUnits",
            )
        )
    for key in counts[1:]:
        out.errors.append(FieldError(f"spec.{key}", f"cannot be combined with spec.{counts[0]}"))
    count_path = f"spec.{counts[0]}" if counts else "spec.replicas"
    template = legacy.template if legacy.template is not None else {}
    if legacy.template is None:
        out.errors.append(
            FieldError("spec.template", "Required value: the v1alpha1 shape needs a pod template")
        )

    worker_template = copy.deepcopy(template)
    workers = legacy.replicas or 1
    units = (
        _units_per_worker(legacy, template, gpus_per_node, out) if legacy.replicas is None else None
    )
    if units is not None:
        workers, per_worker, resource, explicit = units
        if workers > max_workers:
            # Said here, with the split, because the count the limit applies to is not the one
            # written.
            detail = f"{workers} workers of {per_worker} {resource}"
            out.errors.append(
                FieldError(
                    count_path, too_many_workers(shape[counts[0]], max_workers, detail=detail)
                )
            )
        container = _first_container(worker_template)
        resources = container.setdefault("resources", {}) if container and not explicit else None
        limits = resources.setdefault("limits", {}) if isinstance(resources, dict) else None
        if isinstance(limits, dict):
            limits[resource] = per_worker
        if per_worker > 0 and "slotsPerWorker" not in spec:
            spec["slotsPerWorker"] = per_worker
            out.notes.append(
                LegacyNote(count_path, f"spec.slotsPerWorker: {per_worker}", "units per worker")
            )
        out.notes.append(
            LegacyNote(
                f"{count_path}: {shape[counts[0]]}",
                f"spec.mpiReplicaSpecs.Worker.replicas: {workers}",
                f"{per_worker} {resource} per worker in containers[0] limits",
            )
        )
    elif legacy.replicas is not None:
        out.notes.append(
            LegacyNote(
                f"spec.replicas: {workers}", f"spec.mpiReplicaSpecs.Worker.replicas: {workers}"
            )
        )
    container = _first_container(worker_template)
    if container:
        container["command"], container["args"] = [SSHD_COMMAND[0]], list(SSHD_COMMAND[1:])
        out.warnings.append(
            "spec.template: v1alpha1 workers ran `sleep 365d` and were driven by kubectl exec; "
            "v2beta1 workers are reached over SSH, so their command is now "
            f"`{' '.join(SSHD_COMMAND)}` "
            "(the image must provide sshd)"
        )
    launcher_template = copy.deepcopy(template)
    launcher_pod = launcher_template.get("spec")
    launcher_containers = launcher_pod.get("containers") if isinstance(launcher_pod, dict) else None
    for item in launcher_containers if isinstance(launcher_containers, list) else []:
        if isinstance(item, dict):
            item.pop("resources", None)  # v1alpha1 launchers never requested the workers' resources
    spec["mpiReplicaSpecs"] = {
        c.REPLICA_LAUNCHER: {"replicas": 1, "template": launcher_template},
        c.REPLICA_WORKER: {"replicas": workers, "template": worker_template},
    }
    out.notes.append(
        LegacyNote(
            "spec.template",
            "spec.mpiReplicaSpecs.{Launcher,Worker}.template",
            "launcher without resources; workers run sshd",
        )
    )
    for rtype in c.REPLICA_TYPES:
        out.aliases.append((f"spec.mpiReplicaSpecs.{rtype}.template", "spec.template"))
    out.aliases.append((f"spec.mpiReplicaSpecs.{c.REPLICA_WORKER}.replicas", count_path))


def _replica_containers(spec: dict[str, Any], rtype: str) -> list[Any] | None:
    specs = spec.get("mpiReplicaSpecs")
    replica = specs.get(rtype) if isinstance(specs, dict) else None
    template = replica.get("template") if isinstance(replica, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return containers if isinstance(containers, list) else None


def _apply_main_container(
    spec: dict[str, Any], legacy: LegacySpecFields, out: LegacyConversion
) -> None:
    name = legacy.main_container
    if name is None:
        return
    found = False
    for rtype in c.REPLICA_TYPES:
        containers = _replica_containers(spec, rtype) or []
        names = [x.get("name") if isinstance(x, dict) else None for x in containers]
        if name not in names:
            continue
        found = True
        index = names.index(name)
        containers.insert(0, containers.pop(index))
        out.notes.append(
            LegacyNote(
                f"spec.mainContainer: {name}",
                f"spec.mpiReplicaSpecs.{rtype}.template.spec.containers[0]",
                f"moved from index {index}" if index else "already first",
            )
        )
    if not found:
        out.warnings.append(
            f"spec.mainContainer: no container named {name!r} in the Launcher or Worker template; "
            "containers[0] is treated as the MPI container"
        )


def _apply_launcher_on_master(
    spec: dict[str, Any], legacy: LegacySpecFields, out: LegacyConversion
) -> None:
    if not legacy.launcher_on_master:
        return
    specs = spec.get("mpiReplicaSpecs")
    launcher = specs.get(c.REPLICA_LAUNCHER) if isinstance(specs, dict) else None
    template = launcher.setdefault("template", {}) if isinstance(launcher, dict) else None
    pod = template.setdefault("spec", {}) if isinstance(template, dict) else None
    if not isinstance(pod, dict) or not isinstance(pod.setdefault("tolerations", []), list):
        out.warnings.append(
            "spec.launcherOnMaster: not applied: the Launcher template is not a pod template"
        )
        return
    pod["tolerations"] += [
        {"key": role, "operator": "Exists", "effect": "NoSchedule"} for role in _MASTER_ROLES
    ]
    affinity = pod.setdefault("affinity", {})
    if isinstance(affinity, dict) and "nodeAffinity" not in affinity:
        terms = [
            {"matchExpressions": [{"key": role, "operator": "Exists"}]} for role in _MASTER_ROLES
        ]
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    else:
        out.warnings.append(
            "spec.launcherOnMaster: the Launcher template's own nodeAffinity is kept"
        )
    out.notes.append(
        LegacyNote(
            "spec.launcherOnMaster: true",
            "spec.mpiReplicaSpecs.Launcher.template.spec.{tolerations,affinity}",
            "control-plane toleration and node affinity",
        )
    )


def _warn_worker_command(spec: dict[str, Any], version: str, out: LegacyConversion) -> None:
    containers = _replica_containers(spec, c.REPLICA_WORKER)
    if not containers or not isinstance(containers[0], dict):
        return
    worker = containers[0]
    field = "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]"
    # Old workers were driven through kubectl exec; v2beta1 workers must answer the launcher's SSH.
    if "command" not in worker and "args" not in worker:
        out.warnings.append(
            f"{field}.command: not set; {c.GROUP}/{version} workers were driven by kubectl exec, "
            "v2beta1 "
            f"workers run `{' '.join(SSHD_COMMAND)}` by default, so the image must provide sshd"
        )
    elif "command" not in worker:
        out.warnings.append(
            f"{field}.command: not set; {c.GROUP}/{version} workers were driven by kubectl exec, "
            "v2beta1 "
            "workers run the image's entrypoint with these args and it must serve SSH"
        )
