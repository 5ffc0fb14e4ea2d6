"""API errors as the apiserver reports them: `StatusError` and the `kind: Status` bodies it becomes.

Every refusal in kubesim is a `StatusError`; the HTTP layer turns it into a `Status` response with
the same code, reason, message and details the real apiserver would send (apimachinery `errors`
package).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# HTTP code -> the StatusReason the apiserver uses for it when nothing more specific applies.
REASON_BY_CODE: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    """A request the apiserver refuses; `status()` is the `kind: Status` body it answers with."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        causes: Sequence[dict[str, str]] = (),
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.causes = list(causes)
        self.retry_after_seconds = retry_after_seconds

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name is not None:
            details["name"] = self.name
        if self.group is not None:
            details["group"] = self.group
        if self.kind is not None:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body


def qualified(resource: str, group: str) -> str:
    """`pods` or `mpijobs.kubeflow.org`: how apiserver messages name a resource."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        name=name,
        group=group,
        kind=resource,
    )


def already_exists(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        name=name,
        group=group,
        kind=resource,
    )


def conflict(resource: str, group: str, name: str, why: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        name=name,
        group=group,
        kind=resource,
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def name_mismatch(body_name: str, url_name: str) -> StatusError:
    return bad_request(
        f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
    )


def forbidden(resource: str, group: str, name: str, why: str) -> StatusError:
    return StatusError(
        403,
        "Forbidden",
        f'{qualified(resource, group)} "{name}" is forbidden: {why}',
        name=name,
        group=group,
        kind=resource,
    )


def invalid(kind: str, group: str, name: str, causes: Sequence[dict[str, str]]) -> StatusError:
    """422 Invalid, formatted like apimachinery's `NewInvalid` (one entry per field error)."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return StatusError(
        422,
        "Invalid",
        f'{kind}.{group} "{name}" is invalid: {summary}'
        if group
        else f'{kind} "{name}" is invalid: {summary}',
        name=name,
        group=group,
        kind=kind,
        causes=causes,
    )


def field_invalid(
    kind: str, group: str, name: str, field: str, message: str, *, reason: str = "FieldValueInvalid"
) -> StatusError:
    """422 Invalid for a single field error."""
    return invalid(kind, group, name, [{"field": field, "reason": reason, "message": message}])


def precondition_failed(
    resource: str, group: str, name: str, what: str, wanted: str, actual: str
) -> StatusError:
    why = f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
    return conflict(resource, group, name, why)


def expired(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def method_not_allowed(message: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unsupported_media_type(message: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", message)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", message)


def from_code(
    code: int, message: str | None = None, *, retry_after_seconds: int | None = None
) -> StatusError:
    """A generic error for `code` (fault injection, unexpected failures)."""
    reason = REASON_BY_CODE.get(code, "Unknown")
    return StatusError(
        code,
        reason,
        message or f"kubesim: injected {code} {reason}",
        retry_after_seconds=retry_after_seconds,
    )
