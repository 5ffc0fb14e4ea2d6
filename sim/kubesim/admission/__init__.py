"""Admission: what a real apiserver checks before it stores an object.

STUB: owned by the kubesim admission work; the signatures are the contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Cause:
    """One entry of a Status's `details.causes`."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class AdmissionError(Exception):
    """The object is refused; the server answers 422 Invalid with these causes."""

    def __init__(self, kind: str, name: str, causes: list[Cause]) -> None:
        self.kind = kind
        self.name = name
        self.causes = causes
        super().__init__(self.message)

    @property
    def message(self) -> str:
        details = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in self.causes)
        return f'{self.kind} "{self.name}" is invalid: [{details}]'


@dataclass
class AdmissionResult:
    obj: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


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
) -> AdmissionResult:
    """Checks, prunes and defaults `obj` (a new dict is returned; `obj` is not mutated).

    `schema` is the CRD version's openAPIV3Schema for custom resources, None for built-in kinds.
    Raises AdmissionError when the object must be refused.
    """
    return AdmissionResult(obj=obj)
