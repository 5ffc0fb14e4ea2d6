"""Flow control shared by `kube` and `cache`: clocks and the token bucket (client-go `util/flowcontrol`).

It lives below both layers (it imports only the standard library) because the API client's QPS/burst
limiter and the work queue's global retry limiter are the same algorithm, and `kube` must not import
`cache`. Everything that waits takes a `Clock`, so tests step time instead of sleeping:
`FakeClock.advance()` fires due timers synchronously, in deadline order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback that can still be cancelled (`asyncio.TimerHandle` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic time, timers and sleep: the one seam through which this runtime sees time."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences are meaningful)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Runs `callback` (sync) once `delay` seconds have passed; needs a running event loop."""
        ...

    async def sleep(self, delay: float) -> None: ...


class MonotonicClock:
    """The real clock: `time.monotonic` (the event loop's own time base) and the running loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(delay, 0.0))


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to (client-go's `clock/testing.FakeClock`), for tests and sims.

    Timers fire synchronously inside `advance()`; coroutines woken by them (e.g. `sleep`) run at the
    caller's next `await`.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(self._now + max(delay, 0.0), callback)
        heapq.heappush(self._heap, (timer.deadline, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_later(delay, wake)
        try:
            await future
        finally:
            timer.cancel()

    def advance(self, seconds: float) -> None:
        """Moves time forward, firing every timer that falls due, each at its own deadline."""
        target = self._now + seconds
        while self._heap and self._heap[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            if not timer.cancelled:
                timer.callback()
        self._now = max(self._now, target)

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)


class TokenBucket:
    """Go's `rate.Limiter`: refills at `qps` tokens per second up to `burst`; each request takes one.

    `reserve()` takes a token now and returns how long the caller must wait for it (tokens may go
    negative, which queues reservations fairly in time); `wait()` sleeps that long. `qps <= 0` or
    infinite means unlimited.

    An `urgent` reservation (not in Go's limiter) does not queue behind the others: it takes its token on
    credit and goes at once, so the requests after it wait one token longer. The average rate still holds;
    it is for the rare write whose delay costs more than the others' (a lost host leaving discovery).
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._clock = clock or MonotonicClock()
        self._tokens = float(self.burst)
        self._last = self._clock.now()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0 or math.isinf(self.qps)

    def _refill(self) -> None:
        now = self._clock.now()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now

    def tokens(self) -> float:
        """Tokens available now (negative while reservations are outstanding)."""
        self._refill()
        return self._tokens

    def reserve(self, *, urgent: bool = False) -> float:
        """Takes one token; returns the delay in seconds until it may be used (0 when available now)."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 or urgent else -self._tokens / self.qps

    def try_accept(self) -> bool:
        """Takes a token only if one is available now."""
        if self.unlimited:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def wait(self, *, urgent: bool = False) -> None:
        """Waits for a token. A cancelled wait gives its reservation back."""
        delay = self.reserve(urgent=urgent)
        if delay <= 0:
            return
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            self._refill()
            self._tokens = min(float(self.burst), self._tokens + 1.0)
            raise
