"""Any served MPIJob (v2beta1, v1, v1alpha2, v1alpha1) -> the canonical model, with notes and every
error.

Pipeline: copy into plain JSON data (dropping nulls, as the API server prunes them) -> check
apiVersion/kind -> map legacy fields (`legacy.py`) -> parse with pydantic (which applies the static
defaults), reporting unknown fields with the closest known name. When parsing fails, the values are
dropped (or empty objects put where one is required) and parsing retried, so the cross-field rules
still run on what is left and one pass reports every problem.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from mpi_operator.api import constants as c
from mpi_operator.api import legacy
from mpi_operator.api.models import MPIJob
from mpi_operator.api.validation import (
    ROOT_PATH,
    FieldError,
    InvalidMPIJob,
    LegacyNote,
    UnknownField,
    describe,
    format_path,
    is_under,
    merge_errors,
    message_for,
    semantic_errors,
    unsupported,
    validate,
)
from mpi_operator.objects import is_mapping

# metav1.ObjectMeta: metadata stays a plain dict in the model, so typos there are caught here.
_OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
_MAX_DEPTH = 100
_MAX_REPAIR_ROUNDS = 25
Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Normalized:
    """A canonical job plus what normalization had to say about the input."""

    job: MPIJob
    notes: list[LegacyNote] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    path_aliases: tuple[tuple[str, str], ...] = ()
    """(canonical path, path in the input) pairs for fields that legacy mapping moved."""
    unknown: list[UnknownField] = field(default_factory=list)
    """Fields the schema does not have: the API server drops them, or refuses them when strict."""


class _NotJSON(Exception):
    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


def _plain(value: Any, loc: Loc = ()) -> Any:
    """A deep copy as JSON data: nulls inside objects dropped, YAML timestamps as strings."""
    if len(loc) > _MAX_DEPTH:
        raise _NotJSON(loc, f"nested deeper than {_MAX_DEPTH} levels")
    if type(value) is str:  # most of a job; the exact types first: the ABC check below costs more
        return value
    if is_mapping(value):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is str:
                name = key
            elif isinstance(key, str | int | float | bool):
                name = str(key).lower() if isinstance(key, bool) else str(key)
            else:
                raise _NotJSON(loc, f"object keys must be strings, got {describe(key)}")
            if item is not None:
                out[name] = _plain(item, (*loc, name))
        return out
    if isinstance(value, list | tuple):
        return [_plain(item, (*loc, i)) for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise _NotJSON(loc, f"must be a finite number, got {value}")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise _NotJSON(loc, f"must be JSON data, got {describe(value)}")


def _type_meta(data: dict[str, Any], errors: list[FieldError]) -> str:
    """Check apiVersion and kind; returns the served version (canonical when unusable)."""
    version = c.VERSION
    api_version = data.get("apiVersion")
    if api_version is None:
        errors.append(FieldError("apiVersion", "Required value"))
    elif api_version not in c.SERVED_API_VERSIONS:
        errors.append(FieldError("apiVersion", unsupported(api_version, c.SERVED_API_VERSIONS)))
    else:
        version = str(api_version).split("/", 1)[1]
    kind = data.get("kind")
    if kind is None:
        errors.append(FieldError("kind", "Required value"))
    elif kind != c.KIND:
        errors.append(FieldError("kind", unsupported(kind, [c.KIND])))
    data["apiVersion"], data["kind"] = c.API_VERSION, c.KIND
    return version


def _container(data: Any, loc: Loc) -> tuple[Any, str | int] | None:
    """The container holding `loc`'s last element, if the path still exists."""
    for part in loc[:-1]:
        in_dict = isinstance(data, dict) and isinstance(part, str) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_dict or in_list):
            return None
        data = data[part]
    return (data, loc[-1]) if loc else None


def _delete(data: dict[str, Any], loc: Loc) -> None:
    found = _container(data, loc)
    if found is None:
        return
    parent, key = found
    if isinstance(parent, dict) and isinstance(key, str):
        parent.pop(key, None)
    elif isinstance(parent, list) and isinstance(key, int) and 0 <= key < len(parent):
        del parent[key]


def _sort_key(loc: Loc) -> tuple[str, ...]:
    return tuple(f"{p:012d}" if isinstance(p, int) else p for p in loc)


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The API model that holds the object at `loc` in an MPIJob, if it is one."""
    kind: Any = MPIJob
    for part in loc:
        while typing.get_origin(kind) in (typing.Union, types.UnionType, typing.Annotated):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        if isinstance(part, int) or typing.get_origin(kind) is dict:
            args = typing.get_args(kind)
            kind = args[-1] if args else None
        elif isinstance(kind, type) and issubclass(kind, BaseModel):
            found = [f for f in kind.model_fields.values() if f.alias == part]
            kind = found[0].annotation if found else None
        else:
            return None
    while typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _unknown(loc: Loc) -> UnknownField:
    """`loc` as an unknown field, with the known name at its place that is closest, if any is."""
    parent = loc[:-1]
    known: Sequence[str] = ()
    if parent == ("metadata",):
        known = sorted(_OBJECT_META_FIELDS)
    elif (model := _model_at(parent)) is not None:
        known = [f.alias for f in model.model_fields.values() if f.alias]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return UnknownField(format_path(loc), close[0] if close else None)


def _parse(data: dict[str, Any]) -> tuple[MPIJob | None, list[FieldError], list[UnknownField]]:
    """Parse, repairing the data after a failure so that the cross-field rules can still run.

    pydantic reports every schema problem in its first pass; later passes only see what the repairs
    did (and list indexes shifted by them), so only the first pass is reported.
    """
    errors: list[FieldError] = []
    warnings: list[UnknownField] = []
    filled: set[Loc] = set()
    for round_ in range(_MAX_REPAIR_ROUNDS):
        try:
            return (
                MPIJob.model_validate(data, by_alias=True, by_name=False, extra="forbid"),
                errors,
                warnings,
            )
        except ValidationError as exc:
            details = exc.errors(include_url=False)
        deletions: list[Loc] = []
        for detail in details:
            loc: Loc = tuple(detail["loc"])
            path = format_path(loc)
            if detail["type"] == "extra_forbidden":
                if round_ == 0:
                    warnings.append(_unknown(loc))
                deletions.append(loc)
                continue
            if round_ == 0 and not any(is_under(path, e.path) for e in errors):
                errors.append(FieldError(path, message_for(detail)))
            found = _container(data, loc)
            if (
                detail["type"] == "missing"
                and loc not in filled
                and found
                and isinstance(found[0], dict)
            ):
                found[0][
                    str(found[1])
                ] = {}  # e.g. a missing spec: look for problems inside an empty one
                filled.add(loc)
            elif loc in filled or detail["type"] == "missing":
                if len(loc) < 2:
                    return None, errors, warnings
                deletions.append(
                    loc[:-1]
                )  # an empty object did not do: drop the object that needs it
            else:
                deletions.append(loc)
        for loc in sorted(set(deletions), key=_sort_key, reverse=True):
            _delete(data, loc)
    return None, errors, warnings


def _relabel(errors: Sequence[FieldError], aliases: Sequence[tuple[str, str]]) -> list[FieldError]:
    out: list[FieldError] = []
    for error in errors:
        path = error.path
        for canonical, original in aliases:
            if is_under(path, canonical):
                path = original + path[len(canonical) :]
                break
        relabelled = FieldError(path, error.message)
        if relabelled not in out:
            out.append(relabelled)
    return out


def normalize(
    obj: Any, *, gpus_per_node: int = 1, max_workers: int = c.MAX_WORKER_REPLICAS
) -> Normalized:
    """The canonical MPIJob, static defaults applied, for any served version of `obj`.

    Raises InvalidMPIJob (and nothing else, whatever `obj` is) when `obj` cannot be represented as
    an MPIJob: wrong types, bad enums or bounds, unknown apiVersion/kind, broken legacy fields. The
    exception then lists every problem, including the cross-field ones `parse_and_validate` checks.
    A job that parses is returned even if cross-field rules fail; `parse_and_validate` checks those.
    `max_workers` is the limit of workers per job in force (`validation.worker_limit`).
    """
    if not isinstance(obj, Mapping):
        raise InvalidMPIJob([FieldError(ROOT_PATH, f"must be an object, got {describe(obj)}")])
    try:
        return _normalize(obj, gpus_per_node, max_workers)
    except InvalidMPIJob:
        raise
    except Exception as exc:  # the contract: one bad object must never take a reconcile loop down
        raise InvalidMPIJob(
            [FieldError(ROOT_PATH, f"internal error while normalizing: {exc!r}")]
        ) from exc


def _normalize(obj: Mapping[str, Any], gpus_per_node: int, max_workers: int) -> Normalized:
    try:
        data = _plain(obj)
    except _NotJSON as exc:
        raise InvalidMPIJob([FieldError(format_path(exc.loc), exc.message)]) from None
    errors: list[FieldError] = []
    version = _type_meta(data, errors)
    conversion = legacy.convert_legacy_fields(
        data, version=version, gpus_per_node=gpus_per_node, max_workers=max_workers
    )
    errors = merge_errors(errors, conversion.errors)
    metadata = data.get("metadata")
    unknown_meta = [
        _unknown(("metadata", key))
        for key in (metadata if isinstance(metadata, dict) else {})
        if key not in _OBJECT_META_FIELDS
    ]
    job, schema_errors, unknown = _parse(data)
    unknown = unknown_meta + unknown
    errors = merge_errors(errors, _relabel(schema_errors, conversion.aliases))
    if job is None:
        raise InvalidMPIJob(
            errors or [FieldError(ROOT_PATH, "cannot be parsed as an MPIJob")],
            warnings=conversion.warnings,
            notes=conversion.notes,
            unknown=unknown,
        )
    if errors:
        raise InvalidMPIJob(
            merge_errors(
                errors, _relabel(semantic_errors(job, max_workers=max_workers), conversion.aliases)
            ),
            warnings=conversion.warnings,
            notes=conversion.notes,
            unknown=unknown,
        )
    return Normalized(
        job, conversion.notes, conversion.warnings, tuple(conversion.aliases), unknown
    )


def parse_and_validate(
    obj: Any,
    *,
    gpus_per_node: int = 1,
    max_workers: int = c.MAX_WORKER_REPLICAS,
    cluster_domain: str = "",
) -> Normalized:
    """`normalize` + `validate`: raises InvalidMPIJob listing every problem, else the canonical job.

    `max_workers`: the operator's limit of workers per job (`validation.worker_limit`), which every
    way to a worker count meets (Worker.replicas, elastic bounds, horovodrun flags, the v1alpha1
    split). `cluster_domain`: the operator's `--cluster-domain`, the end of every host name."""
    result = normalize(obj, gpus_per_node=gpus_per_node, max_workers=max_workers)
    errors = validate(result.job, max_workers=max_workers, cluster_domain=cluster_domain)
    if errors:
        raise InvalidMPIJob(
            _relabel(errors, result.path_aliases),
            warnings=result.warnings,
            notes=result.notes,
            unknown=result.unknown,
        )
    return result


def unknown_fields(obj: Mapping[str, Any]) -> list[UnknownField]:
    """The unknown fields of `obj`, and of the manifest `kubectl apply` last applied to it (its
    annotation): the API server dropped those, so only the annotation still shows a typo."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    applied = annotations.get(LAST_APPLIED) if isinstance(annotations, Mapping) else None
    found: dict[str, UnknownField] = {}
    sources: list[Any] = [obj]
    if isinstance(applied, str):
        with contextlib.suppress(ValueError):  # not kubectl's JSON: nothing to learn from it
            sources.append(json.loads(applied))
    for source in sources:
        try:
            unknown = normalize(source).unknown
        except InvalidMPIJob as exc:
            unknown = exc.unknown
        found.update((u.path, u) for u in unknown if u.path not in found)
    return list(found.values())


def to_canonical_dict(job: MPIJob) -> dict[str, Any]:
    """The job as a `kubeflow.org/v2beta1` JSON object: camelCase keys, no nulls."""
    data = job.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
    data["apiVersion"], data["kind"] = c.API_VERSION, c.KIND
    return data
