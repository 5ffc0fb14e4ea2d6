"""Admission: what a real apiserver checks before it stores an object.

`admit` decodes the object against its schema (Kubernetes' own OpenAPI for built-in kinds, the CRD
version's `openAPIV3Schema` for custom resources), drops unknown fields (warning `unknown field
"..."`, or a 400 `strict decoding error` with `fieldValidation=Strict`), applies defaults, then runs
the kind's validation, the update (immutability) rules and CEL rules. A refusal is an
`AdmissionError`: 422 Invalid with field causes, or 400 BadRequest when the body cannot be decoded
as the kind at all (wrong JSON types, bad quantities or base64, strict unknown fields).

The caller sets a built-in Job's `metadata.uid` before CREATE (its selector comes from it). `obj`
is never changed: a new dict comes back, which may share the parts equal to `old`'s.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesim.admission.builtin import validate_builtin
from kubesim.admission.crd import admit_custom, crd_errors
from kubesim.admission.defaults import apply_defaults
from kubesim.admission.fielderrors import Cause, FieldErrors
from kubesim.admission.immutable import validate_update
from kubesim.admission.schema import MISSING, builtin_schema
from kubesim.admission.structural import Walker

__all__ = ["AdmissionError", "AdmissionResult", "Cause", "admit"]


class AdmissionError(Exception):
    """The object is refused; the server answers `code` (422 Invalid, or 400 BadRequest) with these
    causes."""

    def __init__(
        self,
        kind: str,
        name: str,
        causes: list[Cause],
        *,
        code: int = 422,
        reason: str = "Invalid",
        message: str | None = None,
        qualified_kind: str | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.causes = causes
        self.code = code
        self.reason = reason
        self.qualified_kind = qualified_kind or kind
        self._message = message
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if self._message is not None:
            return self._message
        parts = [f"{c.field}: {c.message}" if c.field else c.message for c in self.causes]
        details = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        return f'{self.qualified_kind} "{self.name}" is invalid: {details}'


@dataclass
class AdmissionResult:
    obj: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _dedupe(causes: list[Cause]) -> list[Cause]:
    """Schema-driven and hand-written checks can flag the same field for the same reason: report it
    once, with the more specific (longer) wording, where it first appeared."""
    best: dict[tuple[str, str], Cause] = {}
    for c in causes:
        key = (
            c.field,
            c.reason if c.reason in ("FieldValueRequired", "FieldValueNotSupported") else c.message,
        )
        if key not in best or len(c.message) > len(best[key].message):
            best[key] = c
    return list(best.values())


def _decode_failure(kind: str, api_version: str, name: str, detail: str) -> AdmissionError:
    version = api_version.rpartition("/")[2]
    return AdmissionError(
        kind,
        name,
        [Cause("", detail, "FieldValueInvalid")],
        code=400,
        reason="BadRequest",
        message=f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}',
    )


def _unknown_fields(
    kind: str, api_version: str, name: str, unknown: list[str], field_validation: str
) -> list[str]:
    texts = [f'unknown field "{path}"' for path in unknown]
    if not texts or field_validation == "Ignore":
        return []
    if field_validation == "Strict":
        raise _decode_failure(kind, api_version, name, "strict decoding error: " + ", ".join(texts))
    return texts


def admit(
    *,
    operation: Literal["CREATE", "UPDATE"],
    api_version: str,
    kind: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    schema: dict[str, Any] | None,
    field_validation: Literal["Ignore", "Warn", "Strict"] = "Warn",
    subresource: str | None = None,
    decoded: bool = False,
) -> AdmissionResult:
    """Checks, prunes and defaults `obj` (a new dict is returned; `obj` is not mutated).

    `schema` is the CRD version's openAPIV3Schema for custom resources, None for built-in kinds.
    `decoded` (built-in kinds): kubesim built `obj` itself in the shape the decode leaves (no
    unknown fields, nulls or wrong types) and hands it over: the schema walk is skipped, and
    defaults and validation apply to `obj` itself, which is returned. Raises AdmissionError when the
    object must be refused.
    """
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    group = api_version.rpartition("/")[0]
    qualified = f"{kind}.{group}" if group else kind
    create = operation == "CREATE"
    if schema is not None:
        outcome = admit_custom(kind, obj, old, schema, create=create)
        if outcome.decode_error:
            raise _decode_failure(kind, api_version, name, outcome.decode_error)
        warnings = _unknown_fields(kind, api_version, name, outcome.unknown, field_validation)
        if outcome.causes:
            raise AdmissionError(kind, name, _dedupe(outcome.causes), qualified_kind=qualified)
        return AdmissionResult(outcome.obj, [*warnings, *outcome.warnings])

    node = builtin_schema(api_version, kind)
    if node is None:
        return AdmissionResult(_copy(obj))
    if decoded:
        result, errs, warnings = obj, FieldErrors(), []
    else:
        walker = Walker(builtin=True)
        walked = walker.walk(
            obj, node, "", MISSING if old is None else old, go=(node.go_type.rpartition(".")[2], "")
        )
        if walker.decode_error:
            raise _decode_failure(kind, api_version, name, walker.decode_error)
        result = walked if isinstance(walked, dict) else {}
        errs = walker.errors
        warnings = _unknown_fields(kind, api_version, name, walker.unknown, field_validation)
    result.setdefault("apiVersion", api_version)
    result.setdefault("metadata", {})
    if not (kind == "Pod" and subresource == "status"):
        # A pod's defaults are its spec's, which a status write takes from the stored (defaulted)
        # pod.
        apply_defaults(kind, result, old, create=create and subresource is None)
    if subresource is None:
        validate_builtin(kind, result, errs)
        if kind == "CustomResourceDefinition":
            crd_errors(result, errs)
        if not create and old is not None:
            validate_update(kind, result, old, errs)
    if errs:
        raise AdmissionError(kind, name, _dedupe(errs.causes), qualified_kind=qualified)
    return AdmissionResult(result, warnings)


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(obj)
