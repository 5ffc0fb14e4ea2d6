"""Field errors worded like apimachinery's `util/validation/field` (`Invalid value: "x": detail`,
...).

`FieldErrors` collects them as `Cause`s: `field` is the path (`spec.containers[0].name`), `message`
the error body, `reason` the StatusCause type (`FieldValueInvalid`, `FieldValueRequired`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One entry of a Status's `details.causes`."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


def go_quote(value: str) -> str:
    """strconv.Quote for the common case (JSON escaping matches Go's for printable text)."""
    return json.dumps(value, ensure_ascii=False)


def go_value(value: Any) -> str:
    """How `field.Invalid` prints a bad value: quoted strings, plain scalars, and (apimachinery >=
    1.31) JSON for lists, maps and structs, as in `Invalid value: ["None"]: may not change once
    set`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def quote_all(values: Iterable[Any]) -> str:
    return ", ".join(
        go_quote(str(v)) if not isinstance(v, int | float) else json.dumps(v) for v in values
    )


class FieldErrors:
    def __init__(self) -> None:
        self.causes: list[Cause] = []

    def __bool__(self) -> bool:
        return bool(self.causes)

    def invalid(self, path: str, value: Any, detail: str) -> None:
        body = f"Invalid value: {go_value(value)}"
        self.causes.append(
            Cause(path, f"{body}: {detail}" if detail else body, "FieldValueInvalid")
        )

    def invalid_shown(self, path: str, shown: str, detail: str) -> None:
        """An Invalid whose value is already rendered (CRD errors print the type name: "object")."""
        self.causes.append(Cause(path, f"Invalid value: {shown}: {detail}", "FieldValueInvalid"))

    def required(self, path: str, detail: str = "") -> None:
        self.causes.append(
            Cause(
                path,
                f"Required value: {detail}" if detail else "Required value",
                "FieldValueRequired",
            )
        )

    def forbidden(self, path: str, detail: str) -> None:
        self.causes.append(Cause(path, f"Forbidden: {detail}", "FieldValueForbidden"))

    def duplicate(self, path: str, value: Any) -> None:
        self.causes.append(
            Cause(path, f"Duplicate value: {go_value(value)}", "FieldValueDuplicate")
        )

    def duplicate_shown(self, path: str, shown: str) -> None:
        self.causes.append(Cause(path, f"Duplicate value: {shown}", "FieldValueDuplicate"))

    def not_found(self, path: str, value: Any) -> None:
        self.causes.append(Cause(path, f"Not found: {go_value(value)}", "FieldValueNotFound"))

    def not_supported(self, path: str, value: Any, supported: Sequence[Any]) -> None:
        msg = f"Unsupported value: {go_value(value)}"
        if supported:
            msg += f": supported values: {quote_all(supported)}"
        self.causes.append(Cause(path, msg, "FieldValueNotSupported"))

    def too_long(self, path: str, limit: int, unit: str = "bytes") -> None:
        self.causes.append(
            Cause(path, f"Too long: may not be more than {limit} {unit}", "FieldValueTooLong")
        )

    def too_many(self, path: str, actual: int, limit: int) -> None:
        self.causes.append(
            Cause(path, f"Too many: {actual}: must have at most {limit} items", "FieldValueTooMany")
        )

    def extend(self, other: FieldErrors) -> None:
        self.causes.extend(other.causes)
