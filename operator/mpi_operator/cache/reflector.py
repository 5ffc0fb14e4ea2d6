"""Reflector: keeps a store equal to the API server's view of one resource (client-go
`reflector.go`).

LIST, then WATCH with bookmarks from the list's resourceVersion, advancing it with every event. On
410 Gone it lists again (the store is replaced, deletions included); when a stream ends or breaks it
watches again from the last resourceVersion, after a jittered backoff when it failed, or after the
server's own `Retry-After`. With a `RecoveryProber` (`cache.recovery`), a failure that says the
server is not there ends that backoff as soon as it answers again. `transform` runs on every object
before the store sees it, list pages as they arrive. `run()` never returns; cancel its task. The
`ListerWatcher` and `ReflectorStore` protocols keep it independent of the HTTP client.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import NoReturn, Protocol

from mpi_operator import flowcontrol
from mpi_operator.cache.recovery import RecoveryProber
from mpi_operator.flowcontrol import Clock, MonotonicClock
from mpi_operator.kube import errors
from mpi_operator.objects import KubeObject, WatchEvent, resource_version

log = logging.getLogger(__name__)

DEFAULT_MIN_WATCH_TIMEOUT = 300
"""Watches ask the server to end them after 5-10 minutes (randomised, like client-go), which spreads
reconnects and makes sure a silently dead connection is noticed."""
MAX_RETRY_AFTER = 60.0
"""A longer `Retry-After` is cut to this, so that one answer cannot blind an informer for hours."""
SHORT_WATCH_SECONDS = 1.0
"""A watch that ends sooner than this without one event counts as a failure (gets backoff)."""


Transform = Callable[[KubeObject], KubeObject]
"""What a store keeps of each object the server sent (client-go's `SetTransform`; see
`cache.transforms`)."""


class ListerWatcher(Protocol):
    async def list(
        self,
        namespace: str | None,
        label_selector: str | None,
        *,
        transform: Transform | None = None,
    ) -> tuple[list[KubeObject], str]:
        """Every matching object, as `transform` returns it, and the list's resourceVersion.
        `namespace=None`: all namespaces. A paged list transforms each page as it arrives, so that
        the raw objects of the whole list are never alive at once."""
        ...

    def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after `resource_version` (with bookmarks) until the stream ends; HTTP 410 raises
        `kube.errors.Gone`, a broken stream `kube.errors.TransientError`."""
        ...


class ReflectorStore(Protocol):
    """Where a reflector writes (client-go's `Store` as the reflector sees it)."""

    def replace(self, items: list[KubeObject], resource_version: str) -> None: ...

    def add(self, obj: KubeObject) -> None: ...

    def update(self, obj: KubeObject) -> None: ...

    def delete(self, obj: KubeObject) -> None: ...


class Backoff:
    """Exponential backoff with jitter that forgets old failures (client-go's backoff manager)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.5,
        reset_after: float = 120.0,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock or MonotonicClock()
        self._rng = rng
        self._current = initial
        self._last: float | None = None

    def next(self) -> float:
        """The delay before the next try; grows with each call, starts over after a quiet period."""
        now = self._clock.now()
        if self._last is not None and now - self._last > self.reset_after:
            self._current = self.initial
        self._last = now
        delay = min(self._current, self.cap)
        self._current = min(self._current * self.factor, self.cap)
        return delay * (1.0 + self.jitter * self._rng())

    def reset(self) -> None:
        self._current = self.initial
        self._last = None


class Reflector:
    """Mirrors `lister_watcher`'s objects (in one namespace, or all) into `store`; see module
    doc."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        name: str = "",
        clock: Clock | None = None,  # None for the real clock
        backoff: Backoff | None = None,
        min_watch_timeout: int = DEFAULT_MIN_WATCH_TIMEOUT,
        rng: random.Random | None = None,
        recovery: RecoveryProber | None = None,  # None: plain backoff after every failure
        transform: Transform | None = None,  # None: store objects as sent
    ) -> None:
        self.lister_watcher = lister_watcher
        self.transform = transform
        self.store = store
        self.namespace = namespace
        self.label_selector = label_selector
        self.name = name or f"reflector({namespace or '*'}, {label_selector or ''})"
        self._clock: Clock = clock or MonotonicClock()
        self._rng = rng or random.Random()
        self._backoff = backoff or Backoff(clock=self._clock, rng=self._rng.random)
        self.min_watch_timeout = min_watch_timeout
        self._recovery = recovery
        self.last_sync_resource_version = ""
        """The resourceVersion the store reflects (last list, event or bookmark)."""
        self.lists = 0
        """How many LISTs succeeded (1 + relists)."""
        self.watches = 0
        """How many watch streams were opened."""

    @property
    def has_synced(self) -> bool:
        return self.lists > 0

    async def run(self) -> NoReturn:
        need_list = True
        while True:
            if need_list:
                failure = await self._list()
                if failure is not None:
                    await self._back_off(self._backoff.next(), failure)
                    continue
                need_list = False
            try:
                await self._watch()
            except errors.Gone as exc:
                log.info(
                    "%s: resourceVersion %s expired (%s); relisting",
                    self.name,
                    self.last_sync_resource_version,
                    exc,
                )
                need_list = True
            except Exception as exc:  # never give up: anything else is logged and retried
                delay = self._backoff.next()
                log.warning(
                    "%s: watch failed: %s; resuming in %.2fs",
                    self.name,
                    exc,
                    delay,
                    exc_info=not isinstance(exc, errors.KubeError),
                )
                await self._back_off(delay, exc)

    async def _back_off(self, delay: float, failure: Exception) -> None:
        """Waits `delay` after `failure`, the server's `Retry-After` instead when it named one, or
        less once the prober sees a lost server answer again."""
        if isinstance(failure, errors.ApiError) and failure.retry_after is not None:
            # The server asked for less and said how long: its wait, not ours.
            await self._clock.sleep(min(failure.retry_after, MAX_RETRY_AFTER))
            return
        recovery = self._recovery
        if recovery is None or not recovery.noticed(failure):
            await self._clock.sleep(delay)
            return
        try:
            # A timer, not a second task: the wait ends at whichever comes first.
            async with flowcontrol.timeout(self._clock, delay):
                await recovery.wait()
        except TimeoutError:
            return  # the backoff ran out first: retry as always
        await self._clock.sleep(recovery.jitter())

    async def _list(self) -> Exception | None:
        """Lists into the store; returns the failure, or None on success."""
        try:
            items, rv = await self.lister_watcher.list(
                self.namespace, self.label_selector, transform=self.transform
            )
        except Exception as exc:  # never give up: anything else is logged and retried
            log.warning(
                "%s: list failed: %s",
                self.name,
                exc,
                exc_info=not isinstance(exc, errors.KubeError),
            )
            return exc
        self.store.replace(items, rv)
        self.last_sync_resource_version = rv
        self.lists += 1
        if self._recovery is not None:
            self._recovery.answered()
        return None

    async def _watch(self) -> None:
        """One watch stream from the last resourceVersion; returns when the server ends it."""
        timeout = self._rng.randrange(self.min_watch_timeout, 2 * self.min_watch_timeout + 1)
        started = self._clock.now()
        events = 0
        self.watches += 1
        stream = self.lister_watcher.watch(
            self.namespace,
            self.label_selector,
            self.last_sync_resource_version,
            timeout_seconds=timeout,
        )
        try:
            async for event in stream:
                if events == 0 and self._recovery is not None:
                    self._recovery.answered()
                self._apply(event)
                events += 1
        finally:
            # Closing the generator releases the HTTP connection at once, not when it is collected.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if events == 0 and self._clock.now() - started < SHORT_WATCH_SECONDS:
            # A stream that closes at once, again and again, would otherwise be a hot loop. Logged:
            # the informer is blind meanwhile, for up to the backoff's cap.
            delay = self._backoff.next()
            log.info(
                "%s: the watch ended at once without an event; resuming in %.2fs", self.name, delay
            )
            await self._clock.sleep(delay)
        elif events:
            self._backoff.reset()

    def _apply(self, event: WatchEvent) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without an object: {event!r:.200}")
        if kind == "ERROR":
            raise errors.from_status_object(obj)
        rv = resource_version(obj)
        if kind != "BOOKMARK" and self.transform is not None:
            obj = self.transform(obj)
        if kind == "ADDED":
            self.store.add(obj)
        elif kind == "MODIFIED":
            self.store.update(obj)
        elif kind == "DELETED":
            self.store.delete(obj)
        elif kind != "BOOKMARK":
            log.warning("%s: ignoring watch event of type %r", self.name, kind)
            return
        if rv:
            self.last_sync_resource_version = rv
