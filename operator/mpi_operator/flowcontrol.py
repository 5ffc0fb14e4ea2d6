"""Flow control shared by `kube` and `cache`: clocks and the token bucket (client-go
`util/flowcontrol`).

It lives below both layers (it imports only the standard library) because the API client's QPS/burst
limiter and the work queue's global retry limiter are the same algorithm, and `kube` must not import
`cache`. Everything that waits takes a `Clock`, so tests step time instead of sleeping:
`FakeClock.advance()` fires due timers synchronously, in deadline order, and a test learns that the
code under test is parked on the clock (rather than hoping it is by then) from
`FakeClock.wait_for_sleepers()` / `wait_for_timers()`. `timeout()` is `asyncio.timeout` on a
`Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, TypeVar

T = TypeVar("T")

PARK_WITHIN = 30.0
"""Real seconds `FakeClock`'s drivers wait for the code under test to park on the clock before they
call the run hung."""
RUN_AT_MOST = 3600.0
"""Fake seconds `FakeClock.run_until` moves time at most before it calls the run hung."""


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
    """The real clock: `time.monotonic` and the running loop's timers, held to it.

    A timer or sleep ends only once `now()` has reached its deadline. uvloop's timers (libuv's)
    count whole milliseconds from a time cached per loop iteration, so they can fire up to a
    millisecond early; a caller comparing `now()` with the deadline it asked for (an echo window
    that ends when a held write is due) would then find it not yet passed, and skip the write."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return _DeadlineTimer(time.monotonic() + max(delay, 0.0), callback)

    async def sleep(self, delay: float) -> None:
        await _until_timer(self.call_later, delay)


async def _until_timer(
    call_later: Callable[[float, Callable[[], None]], Timer],
    delay: float,
    on_wake: Callable[[], None] | None = None,
) -> None:
    """A clock's sleep: waits until its own timer for `delay` fires (`on_wake` runs then, in the
    timer's callback), or the waiting task is cancelled."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if on_wake is not None:
            on_wake()
        if not woken.done():  # cancelled with its task
            woken.set_result(None)

    timer = call_later(delay, wake)
    try:
        await woken
    finally:
        timer.cancel()


class _DeadlineTimer:
    """A loop timer set again for what is left until `time.monotonic()` reaches `deadline`."""

    __slots__ = ("_callback", "_deadline", "_handle")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self._deadline, self._callback = deadline, callback
        self._handle = self._arm()

    def _arm(self) -> asyncio.TimerHandle:
        left = max(self._deadline - time.monotonic(), 0.0)
        return asyncio.get_running_loop().call_later(left, self._due)

    def _due(self) -> None:
        if time.monotonic() < self._deadline:
            self._handle = self._arm()
        else:
            self._callback()

    def cancel(self) -> None:
        self._handle.cancel()


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to (client-go's `clock/testing.FakeClock`), for tests and
    sims.

    Timers fire synchronously inside `advance()`; coroutines woken by them (e.g. `sleep`) run at the
    caller's next `await`. A test that drives code over real I/O (an HTTP server in the same loop)
    cannot know from the loop when that code is idle; it can know when the code is parked on this
    clock: `wait_for_sleepers(n)` returns once `n` coroutines are in `sleep()`, then
    `advance_to_next()` moves time exactly to the earliest deadline.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()
        self._sleepers = 0
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(self._now + max(delay, 0.0), callback)
        heapq.heappush(self._heap, (timer.deadline, next(self._seq), timer))
        self._notify()
        return timer

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        asleep = True

        def woke() -> None:
            # A woken sleeper no longer counts although its coroutine only runs later: a driver that
            # just advanced must wait for it to park again, not see it still parked.
            nonlocal asleep
            if asleep:
                asleep = False
                self._sleepers -= 1

        # Counted before the timer exists, so a waiter notified by `call_later` already sees this
        # sleeper.
        self._sleepers += 1
        try:
            await _until_timer(self.call_later, delay, woke)
        finally:
            woke()

    def advance(self, seconds: float) -> None:
        """Moves time forward, firing every timer that falls due, each at its own deadline."""
        target = self._now + seconds
        while self._heap and self._heap[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            if not timer.cancelled:
                timer.callback()
        self._now = max(self._now, target)

    def advance_to_next(self) -> float:
        """Moves time to the earliest pending deadline (firing what falls due then); returns the new
        time.

        Raises `LookupError` when no timer is pending: time would have nowhere to go."""
        deadline = self.next_deadline
        if deadline is None:
            raise LookupError("no pending timer to advance to")
        self.advance(deadline - self._now)
        return self._now

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)

    @property
    def next_deadline(self) -> float | None:
        """The earliest deadline of a timer still pending, None when there is none."""
        return min(
            (deadline for deadline, _, timer in self._heap if not timer.cancelled), default=None
        )

    @property
    def sleepers(self) -> int:
        """Coroutines parked in `sleep()` whose time has not come yet."""
        return self._sleepers

    async def wait_for_sleepers(self, count: int = 1) -> None:
        """Returns once at least `count` coroutines are parked in `sleep()` on this clock."""
        await self._wait(lambda: self._sleepers >= count)

    async def wait_for_timers(self, count: int = 1) -> None:
        """Returns once at least `count` timers (sleeps included) are pending on this clock."""
        await self._wait(lambda: self.pending_timers >= count)

    async def _wait(self, ready: Callable[[], bool]) -> None:
        # Both conditions only become true when a timer is scheduled, so `call_later` is the one
        # place that needs to look: no polling.
        if ready():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (ready, future)
        self._waiters.append(entry)
        try:
            await future
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    # --- driving code that runs on this clock (tests) ---------------------------------------------
    async def parked(
        self, sleepers: int = 1, *, timers: int = 0, within: float = PARK_WITHIN
    ) -> None:
        """Waits until `sleepers` coroutines sleep on this clock and `timers` timers are pending.

        `within` is real seconds: a bound for a hung run (then `TimeoutError` says what was
        missing), never a speed requirement."""
        try:
            async with asyncio.timeout(within):
                await self.wait_for_sleepers(sleepers)
                await self.wait_for_timers(timers)
        except TimeoutError:
            raise TimeoutError(
                f"fake time {self._now}: {self._sleepers} of {sleepers} sleepers and "
                f"{self.pending_timers} "
                f"of {timers} timers after {within} s"
            ) from None

    async def step(
        self, sleepers: int = 1, *, timers: int = 0, within: float = PARK_WITHIN
    ) -> float:
        """Once the code is `parked`, moves to the earliest deadline; returns the new time."""
        await self.parked(sleepers, timers=timers, within=within)
        return self.advance_to_next()

    async def run_for(
        self, seconds: float, *, sleepers: int = 1, timers: int = 0, within: float = PARK_WITHIN
    ) -> None:
        """Moves time `seconds` ahead, deadline by deadline, each time only once `sleepers`
        coroutines are parked again and `timers` timers pending (code that waits on a timer, not in
        `sleep()`, has run once its timer is pending again); returns with them parked, after what
        fell due at the end has run."""
        end = self._now + seconds
        while True:
            await self.parked(sleepers, timers=timers, within=within)
            deadline = self.next_deadline
            if deadline is None or deadline > end:
                break
            self.advance_to_next()
        self.advance(end - self._now)

    async def run_until(
        self,
        aw: Awaitable[T],
        *,
        sleepers: int = 1,
        timers: int = 0,
        within: float = PARK_WITHIN,
        at_most: float = RUN_AT_MOST,
    ) -> T:
        """Awaits `aw`, moving time to the next deadline whenever the code is `parked` and `aw` is
        not done: time passes exactly as far as the code under test needs, and only while it waits
        on it.

        Raises `TimeoutError` rather than move time more than `at_most` (fake) seconds: code that
        keeps waiting without ever finishing would otherwise be driven forever."""
        target = asyncio.ensure_future(aw)
        horizon = self._now + at_most
        try:
            while not target.done():
                parked = asyncio.ensure_future(self.parked(sleepers, timers=timers, within=within))
                try:
                    await asyncio.wait({target, parked}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if parked.cancel():
                        with contextlib.suppress(asyncio.CancelledError):
                            await parked
                if not target.done():
                    parked.result()  # re-raises the TimeoutError of a hung run
                    deadline = self.next_deadline
                    if deadline is not None and deadline > horizon:
                        raise TimeoutError(
                            f"not done after {at_most} s of fake time (now {self._now})"
                        )
                    self.advance_to_next()
            return target.result()
        finally:
            if (
                target is not aw and target.cancel()
            ):  # a coroutine we wrapped: ours to stop when giving up
                with contextlib.suppress(asyncio.CancelledError):
                    await target

    @contextlib.asynccontextmanager
    async def flowing(self) -> AsyncIterator[None]:
        """Inside, every timer fires as soon as it is pending: time passes instantly whenever the
        code waits on this clock. Only for code whose timers are all waits: a timeout racing real
        I/O would fire before the I/O could finish."""

        async def advance() -> None:
            while True:
                await self.wait_for_timers(1)
                if self.next_deadline is not None:  # not cancelled again meanwhile
                    self.advance_to_next()
                await asyncio.sleep(
                    0
                )  # one loop iteration: what just woke runs before the next step

        task = asyncio.create_task(advance(), name="fake-clock-flowing")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _notify(self) -> None:
        for entry in list(self._waiters):
            ready, future = entry
            if not future.done() and ready():
                future.set_result(None)
                self._waiters.remove(entry)


@contextlib.asynccontextmanager
async def timeout(clock: Clock, delay: float) -> AsyncIterator[None]:
    """`asyncio.timeout(delay)` with `delay` measured on `clock`: the block is cancelled and
    `TimeoutError` raised once `clock` says the time is up (on a `FakeClock`: only when a test
    advances it that far)."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as scope:
        # Expiring "now" on the loop's own scale lets asyncio do the cancel-and-convert it does
        # anyway.
        timer = clock.call_later(delay, lambda: scope.reschedule(loop.time()))
        try:
            yield
        finally:
            timer.cancel()


class TokenBucket:
    """Go's `rate.Limiter`: refills at `qps` tokens per second up to `burst`; each request takes
    one.

    `reserve()` takes a token now and returns how long the caller must wait for it (tokens may go
    negative, which queues reservations fairly in time); `wait()` sleeps that long. `qps <= 0` or
    infinite means unlimited.

    An `urgent` reservation (not in Go's limiter) does not queue behind the others: it takes its
    token on credit and goes at once, so the requests after it wait one token longer. The average
    rate still holds; it is for the rare write whose delay costs more than the others' (a lost host
    leaving discovery).
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
        """Takes one token; returns the delay in seconds until it may be used (0 when available
        now)."""
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
