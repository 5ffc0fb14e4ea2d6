"""Simulated time: `Clock` (a time scale, so a cluster can run faster than real time) and
`FakeClock` (time that moves only when a test advances it). Every controller timer waits on one of
them."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable, Sized
from datetime import UTC, datetime
from typing import Protocol


class Clock:
    """Simulated time: seconds since the cluster started, running `1 / time_scale` times real speed.

    Every delay a controller waits for (start-seconds, back-offs, deadlines, TTLs, volume syncs) is
    in simulated seconds; timestamps written into objects are the real wall-clock times those
    moments map to.
    """

    def __init__(
        self,
        time_scale: float = 1.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.scale = time_scale
        self._monotonic = monotonic
        self._t0 = monotonic()
        self._wall0 = wall()
        self._stamp: tuple[int, str] = (0, "")
        self.queues: list[Sized] = []
        """The controllers' work queues (`track`)."""

    def now(self) -> float:
        return (self._monotonic() - self._t0) / self.scale

    def real_delay(self, sim_seconds: float) -> float:
        return max(0.0, sim_seconds * self.scale)

    def wall(self, at: float | None = None) -> datetime:
        sim = self.now() if at is None else at
        return datetime.fromtimestamp(self._wall0 + sim * self.scale, UTC)

    def timestamp(self, at: float | None = None) -> str:
        """RFC 3339 at second precision, as the apiserver serialises metav1.Time."""
        sim = self.now() if at is None else at
        # The second `wall()` would show (it rounds to microseconds); formatted once per second.
        second = math.floor(round(self._wall0 + sim * self.scale, 6))
        if second != self._stamp[0] or not self._stamp[1]:
            self._stamp = (
                second,
                datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        return self._stamp[1]

    def micro_timestamp(self, at: float | None = None) -> str:
        return self.wall(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def call_later(self, sim_delay: float, callback: Callable[[], None]) -> Timer:
        """Runs `callback` once `sim_delay` simulated seconds have passed (on the running loop's
        timers)."""
        return asyncio.get_running_loop().call_later(self.real_delay(sim_delay), callback)

    def track(self, queue: Sized) -> None:
        """Learns about a controller's work queue (`FakeClock.settle` waits on them; the stats
        endpoint reads them)."""
        self.queues.append(queue)


class Timer(Protocol):
    """A pending `Clock.call_later` callback (`asyncio.TimerHandle` is one)."""

    def cancel(self) -> None: ...


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "due")

    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock(Clock):
    """Simulated time that moves only when told to: `await clock.advance(seconds)`.

    For tests of the timer runtime (`SimSettings(clock=FakeClock())`): start delays, restart
    back-offs, termination grace, Job back-offs, deadlines and TTLs, volume sync periods all wait on
    this clock, so a test decides what has elapsed and a slow or loaded machine changes nothing.
    `advance` fires the timers that fall due in order of due time, each at its own time, and after
    each lets the controllers work off what it queued (`settle`), so every intermediate state a real
    run goes through happens here too. Timestamps written into objects are `wall_start` plus the
    simulated seconds (one real second each).

    Error retries (`WorkQueue.add_rate_limited`) stay on the event loop's real timers: they are not
    simulated behaviour. The process runtime runs real programs in real time and does not take it.
    """

    SETTLE_TURNS = 10_000
    """Loop turns `settle` grants the controllers before it declares them stuck (a crashed worker
    task)."""

    def __init__(self, *, wall_start: float | None = None) -> None:
        start = time.time() if wall_start is None else wall_start
        super().__init__(1.0, monotonic=lambda: 0.0, wall=lambda: start)
        self._now = 0.0
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, sim_delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(self._now + max(0.0, sim_delay), callback)
        heapq.heappush(self._heap, (timer.due, next(self._seq), timer))
        return timer

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)

    def next_due(self) -> float | None:
        """When the earliest pending timer fires (simulated seconds), None when none is pending."""
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    async def settle(self) -> None:
        """Returns once every controller has worked off its queued keys, without moving time."""
        idle = 0
        for _ in range(self.SETTLE_TURNS):
            # Two idle turns in a row: a worker woken on the last turn has had its turn to queue
            # more.
            await asyncio.sleep(0)
            idle = 0 if any(len(q) for q in self.queues) else idle + 1
            if idle >= 2:
                return
        raise RuntimeError(f"kubesim controllers still busy after {self.SETTLE_TURNS} loop turns")

    async def advance(self, seconds: float) -> None:
        """Moves simulated time `seconds` forward, firing each timer due by then at its own due
        time."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self._now + seconds
        await self.settle()
        while (due := self.next_due()) is not None and due <= target:
            self._now = max(self._now, due)
            # Timers due at the same moment fire together, as they would in one turn of a real loop.
            while self._heap and self._heap[0][0] <= self._now:
                _, _, timer = heapq.heappop(self._heap)
                if not timer.cancelled:
                    timer.callback()
            await self.settle()
        self._now = max(self._now, target)

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
