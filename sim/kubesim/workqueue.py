"""The client-go style `WorkQueue` every simulated controller works from (deduplicated keys, delayed
re-adds on the clock's timers, per-key error back-off) and `process`, the worker loop draining
it, which counts each controller's syncs and the CPU time they took (`SyncStats`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kubesim.clock import Clock, Timer
from kubesim.errors import StatusError

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass
class SyncStats:
    """What `process` spent on one queue: syncs run and their CPU time (the process's, so the
    synchronous work a sync's writes cause in other controllers' `on_change` counts too)."""

    controller: str = ""
    syncs: int = 0
    cpu_seconds: float = 0.0


class WorkQueue(Generic[K]):
    """Keys to reconcile: a key queued twice is processed once; `add_after` uses the clock's
    timers."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._items: deque[K] = deque()
        self._queued: set[K] = set()
        self._wakeup = asyncio.Event()
        self._timers: dict[K, tuple[float, Timer]] = {}
        self._failures: dict[K, int] = {}
        self.stats = SyncStats()
        clock.track(self)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._items.append(key)
            self._wakeup.set()

    def add_after(self, key: K, sim_delay: float, *, replace: bool = False) -> None:
        """Queues `key` after `sim_delay` simulated seconds; the earlier timer wins unless
        `replace`."""
        if sim_delay <= 0 and not replace:
            self.add(key)
            return
        due = self._clock.now() + sim_delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due and not replace:
                return
            pending[1].cancel()
        self._timers[key] = (due, self._clock.call_later(sim_delay, lambda: self._fire(key)))

    def add_rate_limited(self, key: K) -> None:
        """Re-queues after an error: 5 ms doubling per consecutive failure, at most 1 s (real
        time)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(0.005 * 2**failures, 1.0)
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()
        handle = asyncio.get_running_loop().call_later(delay, self._fire, key)
        self._timers[key] = (self._clock.now() + delay / self._clock.scale, handle)

    def forget(self, key: K) -> None:
        """Clears the error back-off of `key` (after a successful sync)."""
        self._failures.pop(key, None)

    def cancel(self, key: K) -> None:
        """Drops a pending delayed add of `key` (the object is gone)."""
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()
        self._failures.pop(key, None)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> K:
        while not self._items:
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._items.popleft()
        self._queued.discard(key)
        return key

    def close(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


async def process(
    name: str, queue: WorkQueue[K], sync: Callable[[K], None], batch: int = 64
) -> None:
    """The worker loop every controller runs: one key at a time, errors re-queued with back-off,
    yielding to the rest of the loop after every `batch` keys."""
    handled = 0
    stats = queue.stats
    stats.controller = name
    cpu = time.process_time
    try:
        while True:
            key = await queue.get()
            started = cpu()
            try:
                sync(key)
            except StatusError as err:
                log.debug("%s: sync %s: %s", name, key, err)
                queue.add_rate_limited(key)
            except Exception:
                log.exception("%s: sync %s failed", name, key)
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            stats.cpu_seconds += cpu() - started
            stats.syncs += 1
            handled += 1
            if handled % batch == 0:
                # Long bursts of queued keys must not starve the HTTP server sharing this loop.
                await asyncio.sleep(0)
    finally:
        queue.close()
