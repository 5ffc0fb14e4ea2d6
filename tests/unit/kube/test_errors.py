"""Typed API errors from statuses, Status bodies and ApiException; Retry-After; the retry policy's
waits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from mpi_operator.kube import errors
from mpi_operator.kube.client import parse_warning
from mpi_operator.kube.retry import RetryPolicy


def status(code: int, reason: str, **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": "m",
        "details": details,
    }


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (409, "AlreadyExists", errors.AlreadyExists),
        (409, "Conflict", errors.Conflict),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (504, "Timeout", errors.ServerError),
        (418, "Teapot", errors.ApiError),
    ],
    ids=lambda v: str(v) if isinstance(v, int | str) else v.__name__,
)
def test_status_codes_and_reasons_pick_the_class(
    code: int, reason: str, expected: type[errors.ApiError]
) -> None:
    err = errors.from_status(code, json.dumps(status(code, reason)).encode())
    assert type(err) is expected
    assert (err.status, err.reason, err.message) == (code, reason, "m")
    assert errors.is_transient(err) == (code == 429 or code >= 500)
    assert type(errors.from_status_object(status(code, reason))) is expected


def test_invalid_carries_its_field_causes() -> None:
    body = status(
        422,
        "Invalid",
        causes=[{"field": "metadata.name", "reason": "FieldValueInvalid", "message": "bad"}],
    )
    err = errors.from_status(422, body)
    assert err.causes == [errors.Cause("metadata.name", "FieldValueInvalid", "bad")]


@pytest.mark.parametrize(
    ("headers", "body_details", "expected"),
    [
        ({"Retry-After": "3"}, {}, 3.0),
        ({"Retry-After": "  7 "}, {}, 7.0),
        ({}, {"retryAfterSeconds": 2}, 2.0),
        ({"Retry-After": "junk"}, {"retryAfterSeconds": 5}, 5.0),
        ({}, {}, None),
    ],
    ids=["header-seconds", "header-spaces", "status-details", "bad-header-falls-back", "none"],
)
def test_retry_after_from_header_or_status_details(
    headers: dict[str, str], body_details: dict[str, Any], expected: float | None
) -> None:
    assert (
        errors.from_status(429, status(429, "TooManyRequests", **body_details), headers).retry_after
        == expected
    )


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    header = format_datetime(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True)
    assert errors.parse_retry_after(header, now=now) == pytest.approx(30.0)


def test_api_exceptions_are_translated_and_status_zero_is_transient() -> None:
    exc = ApiException(status=409, reason="Conflict")
    exc.body = json.dumps(status(409, "AlreadyExists")).encode()
    assert isinstance(errors.from_api_exception(exc), errors.AlreadyExists)
    assert isinstance(
        errors.from_api_exception(ApiException(status=0, reason="boom")), errors.TransientError
    )


def test_non_json_error_bodies_keep_the_text_as_message() -> None:
    err = errors.from_status(502, b"Bad Gateway from the proxy", http_reason="Bad Gateway")
    assert type(err) is errors.ServerError
    assert err.reason == "Bad Gateway"
    assert err.body is None


@pytest.mark.parametrize(
    ("header", "text"),
    [
        ('299 - "unknown field \\"spec.x\\""', 'unknown field "spec.x"'),
        ('299 - "v1 Foo is deprecated"', "v1 Foo is deprecated"),
        ("not a warn-value", "not a warn-value"),
    ],
    ids=["escaped-quotes", "plain", "malformed"],
)
def test_warning_headers_are_unquoted(header: str, text: str) -> None:
    assert parse_warning(header) == text


async def test_retry_policy_waits_retry_after_clamped_and_reraises_the_last_error() -> None:
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    calls = 0

    async def always_throttled() -> None:
        nonlocal calls
        calls += 1
        raise errors.TooManyRequests(
            429, "TooManyRequests", retry_after=500.0 if calls == 1 else 2.0
        )

    policy = RetryPolicy(attempts=3, max_retry_after=60.0, sleep=sleep)
    with pytest.raises(errors.TooManyRequests):
        await policy.call(always_throttled)
    assert calls == 3
    assert delays == [60.0, 2.0]


async def test_retry_policy_does_not_retry_permanent_errors() -> None:
    calls = 0

    async def conflict() -> None:
        nonlocal calls
        calls += 1
        raise errors.Conflict(409, "Conflict")

    with pytest.raises(errors.Conflict):
        await RetryPolicy(attempts=5).call(conflict)
    assert calls == 1
