"""Retry of ONE API call on transient failures (tenacity): connection errors, timeouts, 5xx and 429.

Only failures that the same request can get past are retried; 4xx answers such as 404, 409 and 422
are the caller's to handle, and retrying a whole reconcile is the work queue's job, not this one's.
When the server sends `Retry-After` (429, sometimes 5xx) we wait exactly that long (bounded by
`max_retry_after`); otherwise exponential backoff with jitter. Attempts are bounded and the last
error is re-raised as itself (`reraise=True`), never wrapped in tenacity's `RetryError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from mpi_operator.kube import errors

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    """Total tries, the first included."""
    backoff_base: float = 0.1
    """First backoff without Retry-After (doubles each retry, plus up to `jitter` seconds)..."""
    backoff_max: float = 5.0
    """... capped here."""
    jitter: float = 0.1
    max_retry_after: float = 60.0
    """A larger Retry-After is clamped to this so one call cannot hang for minutes."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)
    """How the waits between attempts pass: the manager gives its `Clock.sleep` (so they run on a
    `FakeClock` in tests); a test may also pass a sleep that only records the delays."""

    def wait_seconds(self, retry_state: RetryCallState) -> float:
        """Retry-After when the server gave one, else exponential backoff with jitter."""
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, errors.ApiError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_retry_after)
        backoff = wait_exponential_jitter(
            multiplier=self.backoff_base, max=self.backoff_max, jitter=self.jitter
        )
        return float(backoff(retry_state))

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            sleep=self.sleep,
            stop=stop_after_attempt(max(self.attempts, 1)),
            wait=self.wait_seconds,
            retry=retry_if_exception(errors.is_transient),
            before_sleep=_log_retry,
            reraise=True,
        )

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Runs `fn()` until it succeeds, fails permanently or runs out of attempts.

        The first attempt runs outside tenacity, whose bookkeeping per attempt (a retry state and
        every callback wrapped again) cost more CPU than the request itself; only a transient
        failure enters the loop, as its first attempt, so waits and attempt numbers are what they
        were."""
        try:
            return await fn()
        except Exception as exc:
            if self.attempts <= 1 or not errors.is_transient(exc):
                raise
            first: list[Exception] = [exc]

        async def again() -> T:
            if first:
                raise first.pop()
            return await fn()

        async for attempt in self.retrying():
            with attempt:
                return await again()
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


NO_RETRY = RetryPolicy(attempts=1)


def _log_retry(retry_state: RetryCallState) -> None:
    outcome = retry_state.outcome
    log.debug(
        "retrying API call after attempt %d: %s (waiting %.3fs)",
        retry_state.attempt_number,
        outcome.exception() if outcome is not None else None,
        retry_state.upcoming_sleep,
    )
