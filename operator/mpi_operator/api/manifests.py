"""`mpi-operator validate FILE...`: check MPIJob manifests offline with the operator's own rules.

Checks every MPIJob of every served version in YAML files (`-`: stdin), one line per finding:

    FILE[DOC]: field.path: message          an error (DOC = 0-based position in the YAML stream)
    FILE[DOC]: warning: ...                 e.g. an unknown field, with --validate=warn
    FILE[DOC]: note: legacy -> canonical    a legacy field and its v2beta1 equivalent
    FILE[DOC]: OK MPIJob "name" (...)       one line per valid job

Unknown fields are errors, as under `kubectl apply`'s strict default. Exit status (the highest
applies): 0 all valid, 1 invalid, not YAML, or no MPIJob (unless --allow-empty), 2 a file unread.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, TextIO

import yaml

from mpi_operator.api import constants as c
from mpi_operator.api import elastic
from mpi_operator.api.normalize import Normalized, parse_and_validate
from mpi_operator.api.validation import InvalidMPIJob, UnknownField

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2

FieldValidation = Literal["strict", "warn", "ignore"]
FIELD_VALIDATION: Final[tuple[FieldValidation, ...]] = ("strict", "warn", "ignore")
"""kubectl's `--validate` values: what an unknown field is (kubectl's default is strict)."""


class ManifestLoader(yaml.SafeLoader):
    """SafeLoader that, like kubectl, keeps timestamps as strings."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """(index, document) for each YAML document, empty ones included (so indexes match the
    stream)."""
    yield from enumerate(yaml.load_all(text, Loader=ManifestLoader))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(exc, "context", None)
    return f"invalid YAML: {where}{problem}" + (f" ({context})" if context else "")


def _is_mpijob(doc: dict[str, Any]) -> bool:
    """MPIJobs of our group or of none, and kubeflow.org documents whose kind looks like a typo of
    it."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    group = (
        api_version.split("/", 1)[0]
        if isinstance(api_version, str) and "/" in api_version
        else None
    )
    if kind == c.KIND:
        return group in (None, c.GROUP)  # an MPIJob of another API group is not ours to judge
    return group == c.GROUP and (not isinstance(kind, str) or c.KIND.lower() in kind.lower())


def _summary(result: Normalized, api_version: Any) -> str:
    job = result.job
    workers = job.worker.replicas if job.worker is not None else 0
    parts = [str(api_version), f"{workers} worker{'s' if workers != 1 else ''}"]
    policy = elastic.effective_elastic_policy(job)
    if policy is not None:
        inferred = "" if job.spec.elastic_policy is not None else " inferred from horovodrun"
        parts.append(f"elastic {policy.min_replicas}..{policy.max_replicas}{inferred}")
    return f'OK MPIJob "{job.name}" ({", ".join(parts)})'


def _unknown_fields(
    label: str, unknown: list[UnknownField], mode: FieldValidation, out: TextIO
) -> bool:
    """Prints the unknown fields as `mode` says; whether they make the job invalid."""
    for field in unknown if mode != "ignore" else ():
        if mode == "strict":
            print(f"{label}: {field.message('which kubectl apply refuses')}", file=out)
        else:
            print(
                f"{label}: warning: {field.message('will be dropped by the API server')}", file=out
            )
    return mode == "strict" and bool(unknown)


def _check_job(
    label: str,
    doc: dict[str, Any],
    gpus_per_node: int,
    max_workers: int,
    out: TextIO,
    mode: FieldValidation = "strict",
) -> bool:
    try:
        result = parse_and_validate(doc, gpus_per_node=gpus_per_node, max_workers=max_workers)
    except InvalidMPIJob as exc:
        for note in exc.notes:
            print(f"{label}: note: {note}", file=out)
        for warning in exc.warnings:
            print(f"{label}: warning: {warning}", file=out)
        _unknown_fields(label, exc.unknown, mode, out)
        for error in exc.errors:
            print(f"{label}: {error}", file=out)
        return False
    for note in result.notes:
        print(f"{label}: note: {note}", file=out)
    for warning in result.warnings:
        print(f"{label}: warning: {warning}", file=out)
    if _unknown_fields(label, result.unknown, mode, out):
        return False
    inferred = (
        elastic.infer_elastic_policy(result.job) if result.job.spec.elastic_policy is None else None
    )
    worker = result.job.worker
    if (
        inferred is not None
        and worker is not None
        and not inferred.min_replicas <= worker.replicas <= inferred.max_replicas
    ):
        print(
            f"{label}: warning: spec.mpiReplicaSpecs.Worker.replicas: {worker.replicas} is outside "
            "the "
            f"{inferred.min_replicas}..{inferred.max_replicas} workers the launcher's horovodrun "
            "--min-np/--max-np allow",
            file=out,
        )
    print(f"{label}: {_summary(result, doc.get('apiVersion'))}", file=out)
    return True


def validate_text(
    name: str,
    text: str,
    *,
    gpus_per_node: int,
    out: TextIO,
    max_workers: int = c.MAX_WORKER_REPLICAS,
    field_validation: FieldValidation = "strict",
    allow_empty: bool = False,
) -> int:
    """Validate every MPIJob in one YAML stream; returns EXIT_OK or EXIT_INVALID.

    `gpus_per_node` and `max_workers` are the operator's `--gpus-per-node` and
    `--max-workers-per-job`, so a manifest is judged as the operator that will run it judges it.
    A stream without an MPIJob (say, the empty output of a failed `generate`) is invalid unless
    `allow_empty`."""
    status = EXIT_OK
    jobs = 0
    index = -1
    try:
        for index, doc in _documents(text):
            label = f"{name}[{index}]"
            if doc is None:
                continue
            if not isinstance(doc, dict):
                print(f"{label}: <root>: must be an object (a Kubernetes manifest)", file=out)
                status = EXIT_INVALID
                continue
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                items = [(f"{label}.items[{i}]", item) for i, item in enumerate(doc["items"])]
            else:
                items = [(label, doc)]
            for item_label, item in items:
                if not isinstance(item, dict) or not _is_mpijob(item):
                    kind = (
                        item.get("kind", "object without kind")
                        if isinstance(item, dict)
                        else "non-object"
                    )
                    print(f"{item_label}: note: skipped {kind} (not a {c.GROUP} MPIJob)", file=out)
                    continue
                jobs += 1
                if not _check_job(
                    item_label, item, gpus_per_node, max_workers, out, field_validation
                ):
                    status = EXIT_INVALID
    except yaml.YAMLError as exc:
        print(f"{name}[{index + 1}]: {_yaml_problem(exc)}", file=out)
        return EXIT_INVALID
    if jobs == 0 and status == EXIT_OK:
        if allow_empty:
            print(f"{name}: note: no MPIJob found", file=out)
        else:
            print(f"{name}: no MPIJob found (--allow-empty accepts that)", file=out)
            status = EXIT_INVALID
    return status


def validate_main(
    files: list[str],
    *,
    gpus_per_node: int,
    max_workers: int = c.MAX_WORKER_REPLICAS,
    field_validation: FieldValidation = "strict",
    allow_empty: bool = False,
) -> int:
    """Entry point of `mpi-operator validate FILE...` and its flags; returns the exit status."""
    status = EXIT_OK
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"{name}: cannot read: {reason}", file=sys.stderr)
            status = max(status, EXIT_UNREADABLE)
            continue
        label = "<stdin>" if name == "-" else name
        status = max(
            status,
            validate_text(
                label,
                text,
                gpus_per_node=gpus_per_node,
                max_workers=max_workers,
                out=sys.stdout,
                field_validation=field_validation,
                allow_empty=allow_empty,
            ),
        )
    return status
