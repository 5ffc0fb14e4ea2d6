"""client-go's EventCorrelator (tools/record/events_cache.go), pure: which Events to write, as what.

The aggregator folds similar events (same source, object, type and reason, different messages) into
one `(combined from similar events): <latest message>` event once `max_events` distinct messages
were seen within `max_interval` seconds of each other; the recorder's cache then turns repeats of a
key into `count` + 1. The spam filter, a token bucket per source, object, type and reason (burst 25,
one token back every 5 minutes), drops what comes over it, so a scale-in of a thousand workers
records a handful of Events, not one per pod. client-go's default bucket is per source and object
only (its `SpamKeyFunc` option changes that); ours adds type and reason so that a flood of one
reason (host-list changes) cannot silence another (a `WorkerDisrupted` warning): see "Events that
summarize" in docs/architecture.md. Times are passed in (epoch seconds): tests use a fake clock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

COMBINED_PREFIX: Final = "(combined from similar events): "
MAX_SIMILAR_EVENTS: Final = 10
"""Distinct messages of one reason about one object before they are combined (client-go's
`defaultAggregateMaxEvents`)."""
MAX_INTERVAL_SECONDS: Final = 600.0
"""Similar events further apart than this start counting again
(`defaultAggregateIntervalInSeconds`)."""
SPAM_BURST: Final = 25
"""Events of one type and reason about one object from one source before the filter holds them back
(`defaultSpamBurst`)."""
SPAM_REFILL_SECONDS: Final = 300.0
"""One more event about the object is let through per this many seconds (`defaultSpamQPS`)."""
CACHE_SIZE: Final = 4096
"""Objects (and reasons) remembered, least recently used forgotten first (`maxLruCacheEntries`)."""

Key = tuple[str, ...]


@dataclass(frozen=True)
class Correlated:
    """The Event to write: its `message`, and the `key` whose earlier Event a repeat updates."""

    key: Key
    message: str
    combined: bool = False


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


class EventCorrelator:
    """The aggregator and the spam filter; state is bounded by `cache_size` entries each."""

    def __init__(
        self,
        *,
        max_events: int = MAX_SIMILAR_EVENTS,
        max_interval: float = MAX_INTERVAL_SECONDS,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.max_events = max_events
        self.max_interval = max_interval
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.cache_size = cache_size
        self._similar: OrderedDict[Key, _Similar] = OrderedDict()
        self._buckets: OrderedDict[Key, _Bucket] = OrderedDict()

    def correlate(
        self, source: Key, obj: Key, event_type: str, reason: str, message: str, now: float
    ) -> Correlated | None:
        """What to write for this event about `obj` from `source`, or None: the spam filter holds
        it back. Repeats the recorder updates in place pass the filter as new events do (as in
        client-go, where the filter sees every observed event)."""
        key = (*source, *obj, event_type, reason)
        correlated = self._aggregate(key, message, now)
        return correlated if self._allow(key, now) else None

    def _aggregate(self, similar_key: Key, message: str, now: float) -> Correlated:
        record = self._similar.get(similar_key)
        if record is None or now - record.last > self.max_interval:
            record = _Similar()
        record.last = now
        self._remember(self._similar, similar_key, record)
        record.messages.add(message)
        if len(record.messages) < self.max_events:
            return Correlated((*similar_key, message), message)
        # The tenth distinct message and every one after it: one combined event whose message is
        # the latest; as client-go, one remembered message goes so that the set stays bounded.
        record.messages.pop()
        return Correlated(similar_key, COMBINED_PREFIX + message, combined=True)

    def _allow(self, spam_key: Key, now: float) -> bool:
        bucket = self._buckets.get(spam_key)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        elapsed = max(now - bucket.at, 0.0)
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed / self.refill_seconds)
        bucket.at = now
        self._remember(self._buckets, spam_key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _remember(self, cache: OrderedDict[Key, Any], key: Key, value: object) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.cache_size:
            cache.popitem(last=False)
