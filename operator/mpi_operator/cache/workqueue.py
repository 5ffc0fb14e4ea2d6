"""WorkQueue[K]: client-go's rate-limiting, delaying work queue for asyncio (one loop, no threads).

Fair (keys go out in the order they became dirty; an `urgent` add goes to the front, as
controller-runtime's priority queue) and stingy (a key added many times is processed once, and never
by two workers at once; one added while processed is queued again at `done(key)`). Every `get()`
pairs with `done()`. Delayed adds keep the earliest deadline per key. After `shut_down()` adds are
ignored and queued keys still go out before `get()` raises `ShutDown`; `shut_down_with_drain()` also
waits for in-flight keys.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from mpi_operator.cache.ratelimit import RateLimiter, default_controller_rate_limiter
from mpi_operator.flowcontrol import Clock, MonotonicClock, Timer

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by `WorkQueue.get()` once the queue is shut down and empty: the worker should exit."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        rate_limiter: RateLimiter[K] | None = None,
        clock: Clock | None = None,  # None for the real clock
        name: str = "",
    ) -> None:
        self.name = name
        self._clock: Clock = clock or MonotonicClock()
        self._limiter: RateLimiter[K] = rate_limiter or default_controller_rate_limiter(
            clock=self._clock
        )
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._urgent: set[K] = set()
        """Dirty keys added urgently while being processed: `done()` puts them at the front."""
        self._processing: set[K] = set()
        self._waiting: dict[K, tuple[float, Timer]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drained: asyncio.Future[None] | None = None
        self._shutting_down = False

    # --- adding --------------------------------------------------------------------------------
    def add(self, key: K, *, urgent: bool = False) -> None:
        """Marks `key` dirty; queues it unless it is already queued or being processed. `urgent`
        puts it at the front, moving it there if it is already queued."""
        if self._shutting_down:
            return
        if key in self._dirty:
            if urgent and key in self._processing:
                self._urgent.add(key)
            elif urgent and self._queue and self._queue[0] != key:
                self._queue.remove(key)
                self._queue.appendleft(key)
            return
        self._dirty.add(key)
        if key in self._processing:
            if urgent:
                self._urgent.add(key)
            return  # done() queues it again
        if urgent:
            self._queue.appendleft(key)
        else:
            self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Adds `key` once `delay` seconds have passed; an earlier pending deadline for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        deadline = self._clock.now() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= deadline:
                return
            pending[1].cancel()
        timer = self._clock.call_later(delay, lambda: self._fire(key))
        self._waiting[key] = (deadline, timer)

    def add_rate_limited(self, key: K) -> None:
        """Adds `key` after the delay the rate limiter gives it (and counts one more failure)."""
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: K) -> None:
        """Resets `key`'s failure count (call it after a successful reconcile); does not dequeue
        it."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._limiter.num_requeues(key)

    def _fire(self, key: K) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    # --- taking --------------------------------------------------------------------------------
    async def get(self) -> K:
        """Waits for a key and marks it processing. Raises `ShutDown` when shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # If this getter was woken for a key it will not take, pass the wake-up on.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
            finally:
                if waiter in self._getters:
                    self._getters.remove(waiter)
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """Ends processing of `key`; re-queues it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            if key in self._urgent:
                self._urgent.discard(key)
                self._queue.appendleft(key)
            else:
                self._queue.append(key)
            self._wake_one()
        elif not self._processing and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # --- shutting down -------------------------------------------------------------------------
    def shut_down(self) -> None:
        """Stops accepting keys, drops pending delayed adds and wakes every idle worker."""
        self._shutting_down = True
        for _, timer in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shut_down_with_drain(self) -> None:
        """`shut_down()`, then waits until every key handed out so far has been `done()`."""
        self.shut_down()
        if not self._processing:
            return
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # --- observation ---------------------------------------------------------------------------
    def __len__(self) -> int:
        """Keys queued and not yet handed out (client-go's `Len`, the depth metric)."""
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def waiting(self) -> int:
        """Keys scheduled by `add_after` / `add_rate_limited` that are not due yet."""
        return len(self._waiting)
