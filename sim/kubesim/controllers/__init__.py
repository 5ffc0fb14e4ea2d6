"""The controllers a cluster runs, simulated: kubelet, Job controller, garbage collector, namespaces.

This package module owns what they share: the simulated `Clock` (a time scale, so a cluster can run
faster than real time) and `FakeClock` (simulated time that moves only when a test advances it), the
client-go style `WorkQueue` (deduplicated keys, delayed re-adds on the clock's timers, per-key error
back-off) and `build_controllers`, which the composition root calls once; it then runs every
`Controller.run()` as a task for the life of the cluster and serves `routes`.

The controllers learn about changes through one `Cluster.add_listener` callback that fans out to their
`on_change` (synchronous and cheap: they only record and enqueue keys) and act from one asyncio task
each; no threads, no polling.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from aiohttp import web

from kubesim.errors import StatusError

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.controllers.gc import GarbageCollector
    from kubesim.controllers.jobs import JobController
    from kubesim.controllers.kubelet import Kubelet
    from kubesim.controllers.namespaces import NamespaceController
    from kubesim.controllers.volumes import VolumeManager
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Controller(Protocol):
    name: str

    async def run(self) -> None:
        """Runs until cancelled."""


class Watching(Protocol):
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """Learns about a committed change; must only record and enqueue (it runs inside the write)."""


class Clock:
    """Simulated time: seconds since the cluster started, running `1 / time_scale` times real speed.

    Every delay a controller waits for (start-seconds, back-offs, deadlines, TTLs, volume syncs) is in
    simulated seconds; timestamps written into objects are the real wall-clock times those moments map to.
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
            self._stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        return self._stamp[1]

    def micro_timestamp(self, at: float | None = None) -> str:
        return self.wall(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def call_later(self, sim_delay: float, callback: Callable[[], None]) -> Timer:
        """Runs `callback` once `sim_delay` simulated seconds have passed (on the running loop's timers)."""
        return asyncio.get_running_loop().call_later(self.real_delay(sim_delay), callback)

    def track(self, queue: Sized) -> None:
        """Learns about a controller's work queue; real time has no use for it (`FakeClock` has)."""


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

    For tests of the timer runtime (`SimSettings(clock=FakeClock())`): start delays, restart back-offs,
    termination grace, Job back-offs, deadlines and TTLs, volume sync periods all wait on this clock, so a
    test decides what has elapsed and a slow or loaded machine changes nothing. `advance` fires the timers
    that fall due in order of due time, each at its own time, and after each lets the controllers work off
    what it queued (`settle`), so every intermediate state a real run goes through happens here too.
    Timestamps written into objects are `wall_start` plus the simulated seconds (one real second each).

    Error retries (`WorkQueue.add_rate_limited`) stay on the event loop's real timers: they are not
    simulated behaviour. The process runtime runs real programs in real time and does not take it.
    """

    SETTLE_TURNS = 10_000
    """Loop turns `settle` grants the controllers before it declares them stuck (a crashed worker task)."""

    def __init__(self, *, wall_start: float | None = None) -> None:
        start = time.time() if wall_start is None else wall_start
        super().__init__(1.0, monotonic=lambda: 0.0, wall=lambda: start)
        self._now = 0.0
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()
        self._queues: list[Sized] = []

    def now(self) -> float:
        return self._now

    def call_later(self, sim_delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(self._now + max(0.0, sim_delay), callback)
        heapq.heappush(self._heap, (timer.due, next(self._seq), timer))
        return timer

    def track(self, queue: Sized) -> None:
        self._queues.append(queue)

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
            # Two idle turns in a row: a worker woken on the last turn has had its turn to queue more.
            await asyncio.sleep(0)
            idle = 0 if any(len(q) for q in self._queues) else idle + 1
            if idle >= 2:
                return
        raise RuntimeError(f"kubesim controllers still busy after {self.SETTLE_TURNS} loop turns")

    async def advance(self, seconds: float) -> None:
        """Moves simulated time `seconds` forward, firing each timer due by then at its own due time."""
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


class WorkQueue(Generic[K]):
    """Keys to reconcile: a key queued twice is processed once; `add_after` uses the clock's timers."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._items: deque[K] = deque()
        self._queued: set[K] = set()
        self._wakeup = asyncio.Event()
        self._timers: dict[K, tuple[float, Timer]] = {}
        self._failures: dict[K, int] = {}
        clock.track(self)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._items.append(key)
            self._wakeup.set()

    def add_after(self, key: K, sim_delay: float, *, replace: bool = False) -> None:
        """Queues `key` after `sim_delay` simulated seconds; the earlier timer wins unless `replace`."""
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
        """Re-queues after an error: 5 ms doubling per consecutive failure, at most 1 s (real time)."""
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


async def process(name: str, queue: WorkQueue[K], sync: Callable[[K], None]) -> None:
    """The worker loop every controller runs: one key at a time, errors re-queued with back-off."""
    handled = 0
    try:
        while True:
            key = await queue.get()
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
            handled += 1
            if handled % 64 == 0:
                # Long bursts of queued keys must not starve the HTTP server sharing this loop.
                await asyncio.sleep(0)
    finally:
        queue.close()


def resource_type(cluster: Cluster, api_version: str, kind: str) -> ResourceType:
    rt = cluster.registry.by_kind(api_version, kind)
    if rt is None:
        raise LookupError(f"kubesim registry has no {api_version} {kind}")
    return rt


def get_or_none(
    cluster: Cluster, rt: ResourceType, namespace: str | None, name: str, *, copy: bool = True
) -> dict[str, Any] | None:
    """The object or None; `copy=False` shares the stored object (no copy per read): read only."""
    try:
        return cluster.get(rt, namespace, name, copy_object=copy)
    except StatusError as err:
        if err.code == 404:
            return None
        raise


@dataclass
class Controllers:
    """What `build_controllers` made; tests reach the kubelet (`evict`, `kill`) and volumes through it."""

    all: list[Controller] = field(default_factory=list)
    routes: list[web.RouteDef] = field(default_factory=list)
    clock: Clock | None = None
    """`settings.clock` when one was given, else a real `Clock` at `settings.time_scale`."""
    kubelet: Kubelet | None = None
    volumes: VolumeManager | None = None
    jobs: JobController | None = None
    gc: GarbageCollector | None = None
    namespaces: NamespaceController | None = None


def build_controllers(cluster: Cluster, settings: SimSettings) -> Controllers:
    # Imported here so the controller modules can import Clock and WorkQueue from this package.
    from kubesim.controllers.gc import GarbageCollector
    from kubesim.controllers.jobs import JobController
    from kubesim.controllers.kubelet import Kubelet
    from kubesim.controllers.namespaces import NamespaceController
    from kubesim.controllers.volumes import VolumeManager

    clock = settings.clock if settings.clock is not None else Clock(settings.time_scale)
    if isinstance(clock, FakeClock) and settings.runtime == "process":
        raise ValueError("the process runtime runs real programs in real time: it cannot take a FakeClock")
    volumes = VolumeManager(cluster, settings, clock)
    kubelet: Kubelet
    if settings.runtime == "process":
        from kubesim.procrt.kubelet import ProcessKubelet

        kubelet = ProcessKubelet(cluster, settings, clock, volumes)
    else:
        kubelet = Kubelet(cluster, settings, clock, volumes)
    jobs = JobController(cluster, settings, clock)
    gc = GarbageCollector(cluster, clock)
    namespaces = NamespaceController(cluster, clock)
    watching: list[Watching] = [volumes, kubelet, jobs, gc, namespaces]

    def fan_out(event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        # One listener for all, called with the stored objects (read only).
        for controller in watching:
            try:
                controller.on_change(event, rt, obj, old)
            except Exception:
                log.exception("kubesim controller %r failed on %s", controller, event)

    cluster.add_listener(fan_out)
    return Controllers(
        all=[kubelet, volumes, jobs, gc, namespaces],
        routes=[*volumes.routes(), *kubelet.routes()],
        clock=clock,
        kubelet=kubelet,
        volumes=volumes,
        jobs=jobs,
        gc=gc,
        namespaces=namespaces,
    )
