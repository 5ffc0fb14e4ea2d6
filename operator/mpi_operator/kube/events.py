"""EventRecorder: best-effort core/v1 Events about objects, with client-go's correlation of repeats.

`record()` never raises into the caller and never blocks it: events are queued and written by one
background task in order (`flush()` waits for them, `close()` flushes before shutdown). client-go's
correlator (`eventcorrelator.py`) first folds similar events into one and holds back floods about
one object; then repeats of one key within `aggregation_window` seconds update the existing Event
(`count` + 1, a new `lastTimestamp`, client-go's EventLogger) instead of creating one, or create a
new one if it has expired (404). Messages are cut to 1024 bytes of UTF-8 on a character boundary:
the API's limit for an Event's note (events.k8s.io/v1), which upstream's controller applies too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mpi_operator import reasons
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.eventcorrelator import EventCorrelator

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
COMPONENT = "mpi-job-controller"
MAX_MESSAGE_LENGTH = reasons.MESSAGE_LIMIT
AGGREGATION_WINDOW_SECONDS = 600.0
CACHE_SIZE = 4096

_Key = tuple[str, ...]


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    last: float


def involved_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ObjectReference an Event points at."""
    meta = obj.get("metadata") or {}
    ref = {
        "kind": obj.get("kind"),
        "apiVersion": obj.get("apiVersion"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


def truncate(message: str, limit: int = MAX_MESSAGE_LENGTH) -> str:
    """At most `limit` bytes of UTF-8, cut on a character boundary with `...` at the end."""
    return reasons.truncate_message(message, limit)


def _timestamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        *,
        component: str = COMPONENT,
        host: str | None = None,
        aggregation_window: float = AGGREGATION_WINDOW_SECONDS,
        cache_size: int = CACHE_SIZE,
        now: Callable[[], float] = time.time,  # wall clock (epoch seconds); injectable for tests
        correlator: EventCorrelator | None = None,
    ) -> None:
        self.kube = kube
        self.component = component
        self.host = host
        self.aggregation_window = aggregation_window
        self.cache_size = cache_size
        self._now = now
        self.correlator = correlator or EventCorrelator(cache_size=cache_size)
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._pending: deque[tuple[Mapping[str, Any], EventType, str, str, float]] = deque()
        self._writer: asyncio.Task[None] | None = None

    def record(self, obj: Mapping[str, Any], type: EventType, reason: str, message: str) -> None:
        """Queues an Event about `obj`; returns at once and never raises."""
        try:
            # The time is taken now: the write may happen later, after other events queued up.
            self._pending.append((obj, type, reason, truncate(message), self._now()))
            if self._writer is None or self._writer.done():
                self._writer = asyncio.get_running_loop().create_task(
                    self._drain(), name="event-recorder"
                )
        except Exception:
            log.exception("dropping event %s/%s: %s", type, reason, message[:200])

    async def flush(self) -> None:
        """Waits until every event recorded so far has been written (or given up on)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def close(self) -> None:
        await self.flush()

    async def _drain(self) -> None:
        while self._pending:
            obj, event_type, reason, message, now = self._pending.popleft()
            try:
                await self._write(obj, event_type, reason, message, now)
            except Exception as exc:  # best effort: an Event is never worth failing a reconcile
                log.warning("could not record event %s %s: %s", event_type, reason, exc)

    async def _write(
        self, obj: Mapping[str, Any], event_type: EventType, reason: str, message: str, now: float
    ) -> None:
        ref = involved_object(obj)
        namespace = ref.get("namespace") or "default"
        source = (self.component, self.host or "")
        about = (ref.get("uid") or "", ref.get("kind") or "", f"{namespace}/{ref.get('name', '')}")
        correlated = self.correlator.correlate(source, about, event_type, reason, message, now)
        if correlated is None:
            log.debug("too many events about %s, dropping %s: %s", about[2], reason, message[:200])
            return
        key, message = correlated.key, truncate(correlated.message)
        seen = self._seen.get(key)
        if seen is not None and now - seen.last <= self.aggregation_window:
            seen.count += 1
            seen.last = now
            self._seen.move_to_end(key)
            try:
                await self.kube.patch(
                    resources.EVENT,
                    seen.name,
                    {"count": seen.count, "lastTimestamp": _timestamp(now), "message": message},
                    namespace=seen.namespace,
                    patch_type="merge",
                )
                return
            except errors.NotFound:
                pass  # expired (events have a TTL): start a new one
        name = f"{ref.get('name', 'object')}.{time.time_ns():x}"
        stamp = _timestamp(now)
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host or "",
        }
        await self.kube.create(resources.EVENT, event, namespace)
        self._seen[key] = _Seen(name, namespace, 1, now)
        self._seen.move_to_end(key)
        while len(self._seen) > self.cache_size:
            self._seen.popitem(last=False)
