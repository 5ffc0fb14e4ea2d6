"""Work-queue rate limiters (client-go `util/workqueue/default_rate_limiters.go`).

A rate limiter answers "how long should this item wait before it is retried?" (`when`), counts the
retries (`num_requeues`) and forgets an item once it succeeded (`forget`). The controller default is
the maximum of a per-item exponential backoff (5 ms doubling up to 1000 s) and a global token bucket
(10 qps, burst 100) so that many failing keys cannot hammer the API server together.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from mpi_operator.flowcontrol import Clock, TokenBucket

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100

# 2**64 * base already exceeds any sane cap; bounding the exponent keeps the float math finite.
_MAX_EXPONENT = 64


class RateLimiter(Protocol[K_contra]):
    def when(self, item: K_contra) -> float:
        """Seconds `item` should wait before its next retry; counts one more failure."""
        ...

    def forget(self, item: K_contra) -> None:
        """The item succeeded: reset its failure count."""
        ...

    def num_requeues(self, item: K_contra) -> int: ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """`base * 2**failures`, capped at `max_delay`, per item."""

    def __init__(
        self, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        return min(self.max_delay, self.base_delay * float(2 ** min(exponent, _MAX_EXPONENT)))

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[K]):
    """A global token bucket over all items: bounds the overall retry rate, not any one item's."""

    def __init__(
        self, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST, *, clock: Clock | None = None
    ):
        self.bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, item: K) -> float:
        return self.bucket.reserve()

    def forget(self, item: K) -> None:
        return None

    def num_requeues(self, item: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest delay any of its limiters asks for (every limiter sees every call)."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: K) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: K) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(
    *,
    base_delay: float = DEFAULT_BASE_DELAY,
    max_delay: float = DEFAULT_MAX_DELAY,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    clock: Clock | None = None,
) -> MaxOfRateLimiter[K]:
    """client-go's `DefaultControllerRateLimiter`; the manager passes the `Settings` queue
    fields."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter[K](base_delay, max_delay),
        BucketRateLimiter[K](qps, burst, clock=clock),
    )
