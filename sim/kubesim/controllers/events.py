"""The core/v1 Events kubesim's controllers record, written through the cluster's own verbs.

`EventRecorder` is client-go's legacy recorder (`tools/record`): `<object>.<hex nanoseconds>` names,
`source` and reporting fields, a repeat bumps `count` and `lastTimestamp` instead of adding an
event, and a token bucket per source and object (25, then one per 5 simulated minutes) bounds a
crash loop. `scheduler=True` writes as kube-scheduler's events.k8s.io recorder does. Both caches are
LRU-bounded; one read and one write per event at most. A refused write (terminating namespace) drops
the event.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from kubesim import builtins, errors
from kubesim.controllers import get_or_none

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.cluster import Cluster

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

MAX_KEYS = 4096
"""Aggregation and spam-filter entries kept; the oldest are forgotten (a later repeat starts a new
event)."""
BURST = 25
REFILL_SECONDS = 300.0
MESSAGE_LIMIT = 1024

_sequence = itertools.count()
"""Keeps event names unique when two recorders write at the same (fake) instant."""


def _reference(obj: Mapping[str, Any], field_path: str | None) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    return {k: v for k, v in ref.items() if v}


class EventRecorder:
    """Records Events on behalf of one component (`kubelet`, `job-controller`,
    `default-scheduler`)."""

    def __init__(
        self,
        cluster: Cluster,
        clock: Clock,
        component: str,
        host: str = "",
        *,
        scheduler: bool = False,
    ) -> None:
        self._cluster = cluster
        self._clock = clock
        self.component = component
        self.host = host
        self._scheduler = scheduler
        self._written: OrderedDict[tuple[str, ...], str] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def event(
        self,
        obj: Mapping[str, Any],
        etype: EventType,
        reason: str,
        message: str,
        *,
        field_path: str | None = None,
        action: str = "",
    ) -> None:
        """Records one event about `obj` (a Pod, a Job: anything namespaced with kind and
        apiVersion)."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        ref = _reference(obj, field_path)
        if not self._allow(str(meta.get("uid", "")) or f"{namespace}/{meta.get('name', '')}"):
            return
        message = message.encode()[:MESSAGE_LIMIT].decode(errors="ignore")
        key = (
            namespace,
            str(ref.get("uid", "")),
            str(ref.get("name", "")),
            field_path or "",
            etype,
            reason,
            message,
        )
        try:
            if self._bump(namespace, key):
                return
            name = self._create(namespace, ref, etype, reason, message, action)
        except errors.StatusError as err:
            log.debug(
                "kubesim %s: event %s on %s/%s dropped: %s",
                self.component,
                reason,
                namespace,
                ref.get("name"),
                err,
            )
            return
        self._written[key] = name
        if len(self._written) > MAX_KEYS:
            self._written.popitem(last=False)

    def _allow(self, subject: str) -> bool:
        """client-go's EventSourceObjectSpamFilter: a token bucket per (source, object)."""
        now = self._clock.now()
        tokens, at = self._buckets.pop(subject, (float(BURST), now))
        tokens = min(float(BURST), tokens + (now - at) / REFILL_SECONDS)
        allowed = tokens >= 1.0
        self._buckets[subject] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > MAX_KEYS:
            self._buckets.popitem(last=False)
        return allowed

    def _bump(self, namespace: str, key: tuple[str, ...]) -> bool:
        """A repeat: count + 1 and lastTimestamp (or the series, for a scheduler event) on the event
        written before; False when there is none any more."""
        name = self._written.get(key)
        if name is None:
            return False
        self._written.move_to_end(key)
        current = get_or_none(self._cluster, builtins.EVENTS, namespace, name, copy=False)
        if current is None:
            del self._written[key]
            return False
        updated = dict(current)
        if self._scheduler:
            series = dict(current.get("series") or {"count": 1})
            series["count"] = int(series.get("count", 1)) + 1
            series["lastObservedTime"] = self._clock.micro_timestamp()
            updated["series"] = series
        else:
            updated["count"] = int(current.get("count", 1)) + 1
            updated["lastTimestamp"] = self._clock.timestamp()
        self._cluster.update(builtins.EVENTS, namespace, name, updated)
        return True

    def _create(
        self,
        namespace: str,
        ref: dict[str, Any],
        etype: str,
        reason: str,
        message: str,
        action: str,
    ) -> str:
        nanos = int(self._clock.wall().timestamp() * 1e9) + next(_sequence)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.get('name', 'event')}.{nanos:x}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": etype,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        if self._scheduler:
            # events.k8s.io/v1 as read through core/v1: eventTime and action, no source or count.
            body["eventTime"] = self._clock.micro_timestamp()
            body["action"] = action or reason
            body["source"] = {}
        else:
            stamp = self._clock.timestamp()
            body["source"] = {
                "component": self.component,
                **({"host": self.host} if self.host else {}),
            }
            body["firstTimestamp"] = stamp
            body["lastTimestamp"] = stamp
            body["count"] = 1
        # Built here to the Event schema (strings, an int count, no nulls): admission need not
        # decode it.
        created = self._cluster.create(builtins.EVENTS, namespace, body, decoded=True).stored
        return str(created["metadata"]["name"])
