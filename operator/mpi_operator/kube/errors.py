"""The operator's own API error hierarchy, built from HTTP statuses and `kind: Status` bodies.

Nothing outside `kube/` sees kubernetes_asyncio's or aiohttp's exceptions: the client translates
them into these. Standard library only, so `cache` can recognise `Gone` without the HTTP stack.

    KubeError
    ├── ApiError(status, reason, message, body): BadRequest, Unauthorized, Forbidden, NotFound,
    │   Conflict (AlreadyExists), Gone 410 (relist), Invalid 422, TooManyRequests 429, ServerError
    └── TransientError: no usable answer (connection refused or reset, timeout)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any


class KubeError(Exception):
    """Base of every error the kube layer raises."""


class TransientError(KubeError):
    """The request got no usable answer (connection error, timeout, cut stream); retrying may
    help."""


@dataclass(frozen=True)
class Cause:
    """One entry of a Status' `details.causes` (422 field errors)."""

    field: str
    reason: str
    message: str


class ApiError(KubeError):
    """The API server answered with an error status (usually with a `kind: Status` body)."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        body: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] | None = body
        self.retry_after = retry_after
        """Seconds the server asked us to wait (`Retry-After` or `details.retryAfterSeconds`)."""
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")

    @property
    def causes(self) -> list[Cause]:
        details = (self.body or {}).get("details") or {}
        return [
            Cause(str(c.get("field", "")), str(c.get("reason", "")), str(c.get("message", "")))
            for c in details.get("causes") or ()
            if isinstance(c, Mapping)
        ]


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: an optimistic-lock failure (stale resourceVersion) or, as subclass, AlreadyExists."""


class AlreadyExists(Conflict):
    pass


class Gone(ApiError):
    """410: the requested resourceVersion is too old (compacted): relist."""


class Invalid(ApiError):
    """422: the object failed validation; `causes` says which fields and why."""


class TooManyRequests(ApiError):
    pass


class ServerError(ApiError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _decode(body: bytes | str | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if body is None or isinstance(body, Mapping):
        return body
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded if isinstance(decoded, dict) else None


def from_status(
    status: int,
    body: bytes | str | Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    http_reason: str = "",
) -> ApiError:
    """The typed error for an HTTP error answer; `body` is the (raw or decoded) `kind: Status`."""
    decoded = _decode(body)
    reason = str((decoded or {}).get("reason") or http_reason)
    message = str((decoded or {}).get("message") or (body if isinstance(body, str) else "") or "")
    retry_after = parse_retry_after((headers or {}).get("Retry-After"))
    if retry_after is None:
        seconds = ((decoded or {}).get("details") or {}).get("retryAfterSeconds")
        retry_after = float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None
    cls = _BY_STATUS.get(status)
    if cls is Conflict and reason == "AlreadyExists":
        cls = AlreadyExists
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(status, reason, message, decoded, retry_after=retry_after)


def from_status_object(status_obj: Mapping[str, Any]) -> ApiError:
    """The typed error carried by a watch `ERROR` event's `kind: Status` object."""
    code = status_obj.get("code")
    return from_status(
        int(code) if isinstance(code, int | str) and str(code).isdigit() else 500, status_obj
    )


def from_api_exception(exc: Exception) -> KubeError:
    """Maps a kubernetes_asyncio `ApiException` (duck-typed: status, reason, body, headers)."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int) or status == 0:
        return TransientError(str(exc))
    headers = getattr(exc, "headers", None)
    return from_status(
        status,
        getattr(exc, "body", None),
        dict(headers) if isinstance(headers, Mapping) else None,
        http_reason=str(getattr(exc, "reason", "") or ""),
    )


UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
"""What a gateway or load balancer answers when no API server behind it is up."""


def is_unavailable(exc: BaseException) -> bool:
    """A 502, 503 or 504 without `Retry-After`: probably no API server there at all, rather than
    one asking for less (which would name its wait)."""
    return (
        isinstance(exc, ServerError)
        and exc.status in UNAVAILABLE_STATUSES
        and exc.retry_after is None
    )


def is_transient(exc: BaseException) -> bool:
    """Worth retrying the same call: no answer, 429 or 5xx."""
    return isinstance(exc, TransientError | TooManyRequests | ServerError)
