"""Validation of MPIJobs: every problem at once, each as `field.path: message` (upstream
ValidateMPIJob+).

Two sources of errors share one format here: the schema (types, enums, bounds: pydantic errors
translated into Kubernetes-style messages) and the rules that span fields (job name vs. worker
count, launcher replicas, containers, elastic bounds), which `semantic_errors` checks on a parsed
job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from mpi_operator.api import constants as c
from mpi_operator.api import defaults, elastic
from mpi_operator.api.models import MPIJob, ReplicaSpec

ROOT_PATH = "<root>"
"""The path of an error about the object as a whole (e.g. it is not a mapping)."""

_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_QUOTED = re.compile(r"'([^']*)'")


@dataclass(frozen=True)
class FieldError:
    """One problem with one field; `str()` gives `path: message`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class LegacyNote:
    """A legacy field that was mapped onto its canonical equivalent
    (`legacy.convert_legacy_fields`).

    Defined here rather than in `legacy`, which imports this module, so that `InvalidMPIJob` can
    carry the notes without an import cycle."""

    legacy_field: str
    canonical_field: str
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.legacy_field} -> {self.canonical_field}"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass(frozen=True)
class UnknownField:
    """A field the schema does not have, with the known name closest to it, if one is close."""

    path: str
    suggestion: str | None = None

    def message(self, consequence: str) -> str:
        """`path: unknown field, <consequence>; did you mean "name"?`"""
        hint = f'; did you mean "{self.suggestion}"?' if self.suggestion else ""
        return f"{self.path}: unknown field, {consequence}{hint}"


class InvalidMPIJob(Exception):
    """The object is not a valid MPIJob; `errors` lists every problem found.

    `warnings`, `notes` (legacy mappings) and `unknown` fields carry what normalization found
    besides the errors, so a caller can show everything at once.
    """

    def __init__(
        self,
        errors: Sequence[FieldError],
        *,
        warnings: Sequence[str] = (),
        notes: Sequence[LegacyNote] = (),
        unknown: Sequence[UnknownField] = (),
    ) -> None:
        self.errors: list[FieldError] = list(errors)
        self.warnings: list[str] = list(warnings)
        self.notes: list[LegacyNote] = list(notes)
        self.unknown: list[UnknownField] = list(unknown)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid MPIJob")


def format_path(loc: Iterable[str | int]) -> str:
    """`("spec", "x", 0, "nvidia.com/gpu")` -> `spec.x[0][nvidia.com/gpu]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        elif part and not any(ch in part for ch in '[]"') and part.isprintable():
            out += f"[{part}]"
        else:
            out += f"[{json.dumps(part)}]"
    return out or ROOT_PATH


def is_under(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or lies inside it."""
    if parent == ROOT_PATH or path == parent:
        return True
    return path.startswith(parent) and path[len(parent)] in ".["


def merge_errors(first: Sequence[FieldError], later: Iterable[FieldError]) -> list[FieldError]:
    """`first` plus those of `later` that are not at or under a path `first` already reports."""
    merged = list(first)
    reported = [e.path for e in first]
    for error in later:
        if not any(is_under(error.path, p) for p in reported) and error not in merged:
            merged.append(error)
    return merged


def describe(value: Any) -> str:
    """A short, type-tagged rendering of a bad input for messages: `string "two"`, `list`, ..."""
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, str):
        return f"string {json.dumps(value[:80])}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__ if value is not None else "null"


def unsupported(value: Any, supported: Iterable[str]) -> str:
    """`Unsupported value: "X": supported values: "A", "B"` (Kubernetes' field.NotSupported
    wording)."""
    shown = json.dumps(value) if isinstance(value, str) else describe(value)
    return f"Unsupported value: {shown}: supported values: " + ", ".join(
        f'"{v}"' for v in supported
    )


_TYPE_MESSAGES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
}


def message_for(error: ErrorDetails) -> str:
    """A Kubernetes-style message for one pydantic error."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return "Required value"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {describe(value)}"
    if kind == "literal_error":
        return unsupported(value, _QUOTED.findall(str(ctx.get("expected", ""))))
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind.startswith(("datetime_", "date_")):
        return f"must be an RFC 3339 date-time such as 2024-01-01T00:00:00Z, got {describe(value)}"
    return str(error["msg"])


def errors_from_pydantic(
    exc: ValidationError, *, prefix: Sequence[str | int] = ()
) -> list[FieldError]:
    """Translate a pydantic ValidationError (unknown fields excluded: they are warnings, not
    errors)."""
    return [
        FieldError(format_path([*prefix, *e["loc"]]), message_for(e))
        for e in exc.errors(include_url=False)
        if e["type"] != "extra_forbidden"
    ]


def _schema_errors(job: MPIJob) -> list[FieldError]:
    # Jobs built with model_construct()/model_copy(update=...) skip pydantic: re-check them.
    data = job.model_dump(by_alias=True, exclude_none=True, warnings=False)
    try:
        MPIJob.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        return errors_from_pydantic(exc)
    return []


def validate(
    job: MPIJob, *, max_workers: int = c.MAX_WORKER_REPLICAS, cluster_domain: str = ""
) -> list[FieldError]:
    """Every problem of a parsed job: schema (types, enums, bounds) and cross-field rules.

    `max_workers` is the operator's limit of workers per job (`worker_limit`); `cluster_domain` its
    `--cluster-domain`, which ends every host name the hostfile lists."""
    errors = semantic_errors(job, max_workers=max_workers, cluster_domain=cluster_domain)
    return merge_errors(_schema_errors(job), errors)


def semantic_errors(
    job: MPIJob, *, max_workers: int = c.MAX_WORKER_REPLICAS, cluster_domain: str = ""
) -> list[FieldError]:
    """The rules a schema cannot express, in upstream's order (name, replica specs, elastic bounds),
    then the worker limit on every field that sets a worker count."""
    errors = _name_errors(job, cluster_domain)
    specs = job.spec.mpi_replica_specs
    base = "spec.mpiReplicaSpecs"
    errors += _replica_spec_errors(specs.launcher, f"{base}.{c.REPLICA_LAUNCHER}")
    if specs.launcher.replicas != 1:
        errors.append(FieldError(f"{base}.{c.REPLICA_LAUNCHER}.replicas", "must be 1"))
    if specs.worker is not None:
        errors += _replica_spec_errors(specs.worker, f"{base}.{c.REPLICA_WORKER}")
        if specs.worker.replicas < 1:
            errors.append(FieldError(f"{base}.{c.REPLICA_WORKER}.replicas", "must be >= 1"))
    errors += _elastic_errors(job)
    errors += _worker_limit_errors(job, max_workers)
    return errors


def worker_limit(requested: int | None = None) -> int:
    """The limit of workers per job in force: `requested` (the operator's --max-workers-per-job),
    which may only lower the API's ceiling `MAX_WORKER_REPLICAS`, else the ceiling; ValueError
    outside 1..ceiling."""
    if requested is None:
        return c.MAX_WORKER_REPLICAS
    if isinstance(requested, bool) or not 1 <= requested <= c.MAX_WORKER_REPLICAS:
        raise ValueError(
            f"must be between 1 and {c.MAX_WORKER_REPLICAS}, got {requested}: it may only lower "
            "the "
            f"ceiling of {c.MAX_WORKER_REPLICAS} workers per MPIJob that the CRD enforces"
        )
    return requested


def too_many_workers(
    value: object, limit: int, *, detail: str = "", with_launcher: bool = False
) -> str:
    """The message of a count over the worker limit `limit`: the value (and what it gives), the
    limit, and whose limit it is; `with_launcher` counts pods, the launcher's included."""
    whose = (
        "the most an MPIJob may have"
        if limit >= c.MAX_WORKER_REPLICAS
        else "the most this operator allows per MPIJob (--max-workers-per-job)"
    )
    most = (
        f"{limit + 1} pods ({limit} workers and the launcher)"
        if with_launcher
        else f"{limit} workers"
    )
    given = f"{detail}: " if detail else ""
    return f"Invalid value: {value}: {given}must be no more than {most}, {whose}"


def _worker_limit_errors(job: MPIJob, limit: int) -> list[FieldError]:
    """Every way to a worker count, held to `limit`: a bigger job would build and write an object
    per worker on each sync, and its hostfile could not be stored (api/constants.py,
    MAX_WORKER_REPLICAS). The v1alpha1 counts are checked where they are split (`legacy.py`)."""
    errors: list[FieldError] = []
    worker = job.spec.mpi_replica_specs.worker
    if worker is not None and worker.replicas > limit:
        path = f"spec.mpiReplicaSpecs.{c.REPLICA_WORKER}.replicas"
        errors.append(FieldError(path, too_many_workers(worker.replicas, limit)))
    policy = job.spec.elastic_policy
    if policy is not None:
        for name, value in (
            ("minReplicas", policy.min_replicas),
            ("maxReplicas", policy.max_replicas),
        ):
            if value > limit:
                errors.append(
                    FieldError(f"spec.elasticPolicy.{name}", too_many_workers(value, limit))
                )
    elif worker is not None:
        errors += _horovodrun_limit_errors(job, limit)
    scheduling = job.spec.run_policy.scheduling_policy
    gang = scheduling.min_available if scheduling is not None else None
    if gang is not None and gang > limit + 1:
        message = too_many_workers(gang, limit, with_launcher=True)
        errors.append(FieldError("spec.runPolicy.schedulingPolicy.minAvailable", message))
    return errors


def _horovodrun_limit_errors(job: MPIJob, limit: int) -> list[FieldError]:
    """An elastic job without elasticPolicy takes its bounds from horovodrun's flags
    (`api/elastic.py`)."""
    args = elastic.parse_horovodrun(elastic.launcher_argv(job))
    inferred = elastic.infer_elastic_policy(job)
    if args is None or inferred is None:
        return []
    low = ("--min-np", args.min_np) if args.min_np is not None else ("-np", args.np)
    # The upper bound only matters when the flag sets it: without --max-np it follows
    # Worker.replicas.
    high = ("--max-np", args.max_np)
    for (flag, processes), workers in ((low, inferred.min_replicas), (high, inferred.max_replicas)):
        if processes is not None and workers > limit:
            slots = max(defaults.slots_per_worker(job.spec), 1)
            detail = f"{workers} workers of {slots} slot{'s' if slots != 1 else ''}"
            path = f"spec.mpiReplicaSpecs.{c.REPLICA_LAUNCHER}.template.spec.containers[0]"
            # One error for the command: a lower bound over the limit puts the upper one over it
            # too.
            return [
                FieldError(
                    path, too_many_workers(json.dumps(f"{flag} {processes}"), limit, detail=detail)
                )
            ]
    return []


def max_worker_index(job: MPIJob) -> int:
    """The highest worker index the job can ever create (elastic jobs may grow to maxReplicas)."""
    worker = job.spec.mpi_replica_specs.worker
    replicas = worker.replicas if worker is not None and worker.replicas > 0 else 1
    if job.spec.elastic_policy is not None:
        replicas = max(replicas, job.spec.elastic_policy.max_replicas)
    return replicas - 1


def _dns1035_problem(label: str) -> str | None:
    if len(label) > c.DNS1035_LABEL_MAX_LENGTH:
        return f"must be no more than {c.DNS1035_LABEL_MAX_LENGTH} characters"
    if not _DNS1035_LABEL.match(label):
        return (
            "must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character"
        )
    return None


def host_name_length(job: MPIJob, hostname: str, cluster_domain: str) -> int:
    """Characters of `<hostname>.<job>.<namespace>.svc[.<cluster domain>]`, the name a hostfile
    lists."""
    namespace = job.metadata.get("namespace") or "default"
    name = job.metadata.get("name") or ""
    domain = f".{cluster_domain}" if cluster_domain else ""
    return len(f"{hostname}.{name}.{namespace}.svc{domain}")


def _name_errors(job: MPIJob, cluster_domain: str = "") -> list[FieldError]:
    name = job.metadata.get("name")
    generate_name = job.metadata.get("generateName")
    if name is None and isinstance(generate_name, str) and generate_name:
        # The API server appends 5 random lower-case alphanumerics.
        name, path = f"{generate_name}xxxxx", "metadata.generateName"
    else:
        path = "metadata.name"
    if name is None:
        return [FieldError(path, "Required value")]
    if not isinstance(name, str):
        return [FieldError(path, f"must be a string, got {describe(name)}")]
    if not name:
        return [FieldError(path, "must not be empty")]
    hostname = f"{name}-worker-{max_worker_index(job)}"
    problem = _dns1035_problem(hostname)
    if problem is None:
        # A replaced elastic worker gets a fresh host name, which may use the whole label.
        longest = (
            c.DNS1035_LABEL_MAX_LENGTH if job.spec.elastic_policy is not None else len(hostname)
        )
        length = host_name_length(job, "x" * longest, cluster_domain)
        if length <= c.DNS1123_SUBDOMAIN_MAX_LENGTH:
            return _host_list_errors(job, path, length)
        return [
            FieldError(
                path,
                f"Invalid value: {json.dumps(name)}: the workers' host names "
                f"(<worker>.{name}.<namespace>.svc"
                f"{'.' + cluster_domain if cluster_domain else ''}) would be "
                f"up to {length} characters, more than the {c.DNS1123_SUBDOMAIN_MAX_LENGTH} of a "
                "DNS name: "
                "use a shorter job name or namespace",
            )
        ]
    return [
        FieldError(
            path,
            f"Invalid value: {json.dumps(name)}: pods and services could not be created: "
            f"the worker hostname {json.dumps(hostname)} {problem} (DNS-1035 label)",
        )
    ]


def _dns_name(length: int) -> str:
    """A DNS name of `length` characters (labels of 62 and dots), standing for a real host name."""
    return "".join("." if i % 63 == 62 and i < length - 1 else "h" for i in range(length))


def _host_list_errors(job: MPIJob, path: str, host_length: int) -> list[FieldError]:
    """Names longer than those the worker ceiling was computed with (a longer cluster domain) leave
    room for fewer workers: the job's host lists must still fit (api/constants.py)."""
    if host_length <= len(c.LONGEST_HOST):
        return []
    workers = max_worker_index(job) + 1
    most = c.most_workers(_dns_name(host_length))
    if workers <= most:
        return []
    return [
        FieldError(
            path,
            f"Invalid value: {json.dumps(job.metadata.get('name'))}: with host names of up to "
            f"{host_length} characters, the hostfile and discover_hosts.sh of {workers} workers "
            f"would not fit well inside the ConfigMap's {c.CONFIG_DATA_MAX_BYTES} bytes: at most "
            f"{most} workers; use a shorter job name, namespace or cluster domain, or fewer "
            "workers",
        )
    ]


def _replica_spec_errors(spec: ReplicaSpec, path: str) -> list[FieldError]:
    pod_spec = spec.template.get("spec")
    if pod_spec is None:
        return [
            FieldError(
                f"{path}.template.spec.containers",
                "Required value: must define at least one container",
            )
        ]
    if not isinstance(pod_spec, Mapping):
        return [FieldError(f"{path}.template.spec", f"must be an object, got {describe(pod_spec)}")]
    containers = pod_spec.get("containers")
    containers_path = f"{path}.template.spec.containers"
    if containers is None or containers == []:
        return [FieldError(containers_path, "Required value: must define at least one container")]
    if not isinstance(containers, list):
        return [FieldError(containers_path, f"must be a list, got {describe(containers)}")]
    errors = []
    for i, container in enumerate(containers):
        item = f"{containers_path}[{i}]"
        if not isinstance(container, Mapping):
            errors.append(FieldError(item, f"must be an object, got {describe(container)}"))
            continue
        for key in ("name", "image"):
            value = container.get(key)
            if value is None:
                errors.append(FieldError(f"{item}.{key}", "Required value"))
            elif not isinstance(value, str):
                errors.append(
                    FieldError(f"{item}.{key}", f"must be a string, got {describe(value)}")
                )
            elif not value:
                errors.append(FieldError(f"{item}.{key}", "must not be empty"))
    return errors


def _elastic_errors(job: MPIJob) -> list[FieldError]:
    policy = job.spec.elastic_policy
    if policy is None:
        return []
    errors = []
    if policy.max_replicas < policy.min_replicas:
        errors.append(
            FieldError(
                "spec.elasticPolicy.maxReplicas",
                f"must be >= spec.elasticPolicy.minReplicas ({policy.min_replicas})",
            )
        )
    worker = job.spec.mpi_replica_specs.worker
    path = f"spec.mpiReplicaSpecs.{c.REPLICA_WORKER}"
    if worker is None:
        errors.append(
            FieldError(path, "Required value: spec.elasticPolicy needs a Worker replica spec")
        )
    elif worker.replicas >= 1 and not policy.min_replicas <= worker.replicas <= policy.max_replicas:
        errors.append(
            FieldError(
                f"{path}.replicas",
                f"must be between spec.elasticPolicy.minReplicas ({policy.min_replicas}) and "
                f"spec.elasticPolicy.maxReplicas ({policy.max_replicas})",
            )
        )
    return errors
