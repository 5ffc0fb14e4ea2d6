"""The API's size limits, checked on every object a plan would write before any of it is sent.

An object over one of them is refused by the API server (422, or etcd's "request is too large"), and
would be refused again on every retry: the reconciler turns what `plan_problems` finds into the
job's `Invalid` condition instead and writes nothing (docs/architecture.md#bounds). The worker
ceiling keeps the ConfigMap within its limit (api/constants.py, MAX_WORKER_REPLICAS); what the
user's pod templates carry (labels and annotations the CRD keeps as free-form data) and what the
operator's settings add are only known here. Pure: the plan's objects in, the problems out.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from mpi_operator.api import constants as c
from mpi_operator.planning.actions import Create, ObjectRef, Plan, Update, UpdateStatus

DATA_MAX_BYTES: Final = c.CONFIG_DATA_MAX_BYTES
"""ConfigMap and Secret: the values of `data` and `binaryData` together."""
ANNOTATIONS_MAX_BYTES: Final = 256 * 1024
"""The keys and values of one object's annotations together (apimachinery
`TotalAnnotationSizeLimitB`)."""
LABEL_VALUE_MAX_LENGTH: Final = 63
QUALIFIED_NAME_MAX_LENGTH: Final = 63
LABEL_PREFIX_MAX_LENGTH: Final = 253
OBJECT_MAX_BYTES: Final = 1536 * 1024
"""A whole object as JSON: etcd's default `--max-request-bytes` (1.5 MiB); the API server stores
objects in a denser encoding, so this errs on the safe side."""

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_SHOWN = 40


@dataclass(frozen=True)
class TooLarge:
    """One object the API would refuse: which, where in it, and what is wrong (naming the limit)."""

    ref: ObjectRef
    field: str
    problem: str
    more: int = 0
    """How many more objects of the same kind have the same problem (worker pods share a
    template)."""

    def __str__(self) -> str:
        others = f" (and {self.more} more {self.ref.kind}s)" if self.more else ""
        return f"{self.ref}{others}: {self.field}: {self.problem}"


def _shown(text: str) -> str:
    return json.dumps(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _json_size(obj: Mapping[str, Any]) -> int:
    """Bytes of `obj` as compact UTF-8 JSON, as the request carries it. By orjson, several times
    faster than json for every object a plan creates; json for what orjson refuses (integers past 64
    bits)."""
    try:
        return len(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:
        return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def _size(count: int, limit: int, unit: str) -> str:
    return f"{count} bytes, more than the {limit} bytes ({unit}) the API allows"


def _label_problems(labels: Any, field: str) -> Iterator[tuple[str, str]]:
    if not isinstance(labels, Mapping):
        return
    for key, value in labels.items():
        for problem in _label_pair_problems(str(key), str(value)):
            yield f"{field}[{key}]", problem


@functools.lru_cache(maxsize=4096)
def _label_pair_problems(key: str, value: str) -> tuple[str, ...]:
    """What is wrong with one label. Cached: every pod of a job, and every job of an operator,
    carries the same few labels, and matching them again was a visible part of each sync."""
    found: list[str] = []
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > LABEL_PREFIX_MAX_LENGTH or not _DNS1123_SUBDOMAIN.match(prefix)):
        found.append("the key's prefix must be a DNS subdomain of at most 253 characters")
    elif not name or len(name) > QUALIFIED_NAME_MAX_LENGTH or not _LABEL_VALUE.match(name):
        found.append(
            f"the key's name must be 1 to {QUALIFIED_NAME_MAX_LENGTH} alphanumeric characters, "
            "'-', '_' or '.', starting and ending with an alphanumeric character"
        )
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        found.append(
            f"value {_shown(value)} is {len(value)} characters, more than the "
            f"{LABEL_VALUE_MAX_LENGTH} a label value may have"
        )
    elif not _LABEL_VALUE.match(value):
        found.append(
            f"value {_shown(value)} must be empty or alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return tuple(found)


def _annotation_problems(annotations: Any, field: str) -> Iterator[tuple[str, str]]:
    if not isinstance(annotations, Mapping):
        return
    total = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if total > ANNOTATIONS_MAX_BYTES:
        yield field, _size(total, ANNOTATIONS_MAX_BYTES, "256 KiB")


def _metadata_problems(meta: Any, field: str) -> Iterator[tuple[str, str]]:
    if isinstance(meta, Mapping):
        yield from _label_problems(meta.get("labels"), f"{field}.labels")
        yield from _annotation_problems(meta.get("annotations"), f"{field}.annotations")


def _decoded_size(value: Any) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except ValueError:
        return len(str(value).encode())


def _data_problems(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    data = obj.get("data")
    data = data if isinstance(data, Mapping) else {}
    binary = obj.get("binaryData")
    binary = binary if isinstance(binary, Mapping) else {}
    if obj.get("kind") == "Secret":
        total = sum(_decoded_size(v) for v in data.values())
    else:
        total = sum(len(str(v).encode()) for v in data.values())
    total += sum(_decoded_size(v) for v in binary.values())
    if total > DATA_MAX_BYTES:
        yield "data", _size(total, DATA_MAX_BYTES, "1 MiB")


def object_problems(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for every API limit `obj` is over: labels, annotations (the pod template's
    too, for a Job), ConfigMap / Secret data, the whole object."""
    found = list(_metadata_problems(obj.get("metadata"), "metadata"))
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if isinstance(template, Mapping):
        found += _metadata_problems(template.get("metadata"), "spec.template.metadata")
    if obj.get("kind") in ("ConfigMap", "Secret"):
        found += _data_problems(obj)
    size = _json_size(obj)
    if size > OBJECT_MAX_BYTES:
        found.append(("<object>", _size(size, OBJECT_MAX_BYTES, "1.5 MiB, etcd's request limit")))
    first: dict[str, str] = {}
    for field, problem in found:
        first.setdefault(field, problem)
    return list(first.items())


def plan_problems(plan: Plan) -> list[TooLarge]:
    """Every object `plan` would create or replace that the API would refuse for its size or its
    labels.

    Objects of one kind with the same problem at the same field (worker pods built from one
    template) are reported once, with how many more there are. Patches are not checked: the
    operator's are a few annotations of its own."""
    found: dict[tuple[str, str], TooLarge] = {}
    for action in plan.actions:
        if not isinstance(action, Create | Update | UpdateStatus):
            continue
        for field, problem in object_problems(action.obj):
            key = (action.ref.kind, field)
            first = found.get(key)
            if first is None:
                found[key] = TooLarge(action.ref, field, problem)
            else:
                found[key] = TooLarge(first.ref, first.field, first.problem, first.more + 1)
    return list(found.values())
