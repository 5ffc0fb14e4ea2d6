"""In-process test control of a running kubesim: faults, latency, dropped watches, compaction,
recording.

Injected errors are answered before the request reaches the cluster, so they never change state
(unlike kmock, whose injected errors still let the write happen). Every API request is recorded with
its Kubernetes verb and outcome, including the `Warning` headers sent, so tests can assert that the
operator's objects cause none.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim import errors
from kubesim.store import Store

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass
class RecordedRequest:
    """One API request as the server saw and answered it."""

    method: str
    path: str
    query: str
    verb: str
    """Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection (""
    otherwise)."""
    group: str
    version: str
    resource: str
    namespace: str
    name: str
    subresource: str
    user_agent: str
    content_type: str
    status: int | None = None
    """HTTP status; None while a watch stream is still open."""
    warnings: list[str] = field(default_factory=list)
    injected: bool = False
    """True when a fault rule (or the fault rate) answered instead of the cluster."""
    refused: bool = False
    """True when a partition (`Control.partition`) dropped the connection instead of answering."""


@dataclass
class FaultRule:
    method: str
    path: re.Pattern[str]
    status: int
    remaining: int | None
    """How many more requests it fails; None for every matching request."""
    message: str | None = None
    retry_after: int | None = None
    hits: int = 0
    user_agent: str | None = None
    """Only requests whose User-Agent contains this (None: every client)."""
    probability: float = 1.0
    """The chance that a matching request is failed (a rate of faults rather than the next
    `count`)."""

    def matches(self, method: str, path: str, user_agent: str = "") -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.user_agent is not None and self.user_agent not in user_agent:
            return False
        methods = WRITE_METHODS if self.method == "WRITE" else (self.method,)
        return ("*" in methods or method in methods) and self.path.search(path) is not None


@dataclass
class LatencyRule:
    method: str
    path: re.Pattern[str]
    seconds: float
    remaining: int | None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.method in ("*", method) and self.path.search(path) is not None


RequestObserver = Callable[["Control", RecordedRequest], None]
_observers: list[RequestObserver] = []
REQUEST_LOG_ENV = "KUBESIM_REQUEST_LOG"
"""Names a file that a kubesim served by `mpi-operator sim` appends each distinct request to (JSON
lines), so a test session can audit requests answered in a child process
(`log_requests_from_env`)."""


def observe_requests(observer: RequestObserver) -> Callable[[], None]:
    """Calls `observer(control, request)` for every API request any kubesim of this process records,
    as it arrives (before it is answered). Returns the function that stops the observing."""
    _observers.append(observer)

    def stop() -> None:
        if observer in _observers:
            _observers.remove(observer)

    return stop


def log_requests_from_env() -> Callable[[], None] | None:
    """With `KUBESIM_REQUEST_LOG` set, appends one JSON line per distinct request (user agent,
    method, path and the Kubernetes attributes) to that file, with the `PYTEST_CURRENT_TEST` of the
    process when first seen. Lines are flushed at once: a child killed with SIGKILL loses
    nothing."""
    path = os.environ.get(REQUEST_LOG_ENV)
    if not path:
        return None
    seen: set[tuple[str, ...]] = set()

    def write(control: Control, request: RecordedRequest) -> None:
        key = tuple(getattr(request, name) for name in LOG_FIELDS)
        if key in seen:
            return
        seen.add(key)
        fields = dict(zip(LOG_FIELDS, key, strict=True))
        line = json.dumps({**fields, "test": os.environ.get("PYTEST_CURRENT_TEST", "")})
        with open(path, "a", encoding="utf-8") as sink:
            sink.write(line + "\n")

    return observe_requests(write)


LOG_FIELDS = (
    "user_agent",
    "method",
    "path",
    "verb",
    "group",
    "resource",
    "subresource",
    "namespace",
    "name",
)
"""The fields of a request each line of the request log names (the readers' contract)."""


class Control:
    """The handle tests use to disturb and observe kubesim (`KubeSim.control`)."""

    def __init__(
        self,
        store: Store,
        *,
        fault_rate: float = 0.0,
        seed: int | None = None,
        max_records: int = 20_000,
        priority_and_fairness: bool = True,
    ) -> None:
        self._store = store
        self.fault_rate = fault_rate
        """Fraction of writes answered 500 (state unchanged); watches are also cut at random."""
        self._rng = random.Random(seed)
        self._faults: list[FaultRule] = []
        self._latency: list[LatencyRule] = []
        self.requests: deque[RecordedRequest] = deque(maxlen=max_records)
        self._partitioned: dict[str, int | None] = {}
        """User agent -> the status its requests are answered with (None: dropped unanswered)."""
        self._streams: dict[int, tuple[str, Callable[[], None]]] = {}
        self._stream_ids = 0
        self.priority_and_fairness = priority_and_fairness
        """Answers carry API Priority and Fairness' `X-Kubernetes-PF-*` headers, as every supported
        Kubernetes version's do (clients read them to leave flow control to the server); False
        stands for an API server without APF (or a proxy that strips the headers)."""

    # --- faults --------------------------------------------------------------------------------
    def inject_error(
        self,
        status: int = 500,
        *,
        method: str = "*",
        path: str = ".*",
        count: int | None = 1,
        message: str | None = None,
        retry_after: int | None = None,
        user_agent: str | None = None,
        probability: float = 1.0,
    ) -> FaultRule:
        """Answers the next `count` requests whose method and URL path (regex search) match with
        `status`.

        `count=None` fails every match until `clear_faults()`. A 429 gets `Retry-After: retry_after
        or 1`. `method="WRITE"` matches POST, PUT, PATCH and DELETE; `user_agent` limits the rule to
        one client (a substring of its User-Agent), so a chaos run can fail the operator's requests
        and not its own; `probability` < 1 fails only that share of the matches (seeded, as
        `fault_rate`).
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"probability must be in (0, 1], got {probability}")
        rule = FaultRule(
            method.upper(),
            re.compile(path),
            status,
            count,
            message,
            retry_after,
            user_agent=user_agent,
            probability=probability,
        )
        self._faults.append(rule)
        return rule

    def inject_latency(
        self, seconds: float, *, method: str = "*", path: str = ".*", count: int | None = None
    ) -> LatencyRule:
        """Delays matching requests by `seconds` before they are handled."""
        rule = LatencyRule(method.upper(), re.compile(path), seconds, count)
        self._latency.append(rule)
        return rule

    def clear_faults(self) -> None:
        self._faults.clear()
        self._latency.clear()

    def drop_watches(self) -> int:
        """Ends every open watch stream (clients see the connection end and must re-watch)."""
        return self._store.close_watchers()

    def compact(self, resource_version: int | None = None) -> int:
        """Forgets the event history up to `resource_version` (default: now): older watches get
        410."""
        return self._store.compact(resource_version)

    def partition(self, *, user_agent: str, status: int | None = None) -> int:
        """An outage for one client: every request whose User-Agent contains `user_agent` has its
        connection dropped without an answer (as a server that went away), and its open watch
        streams are cut, until `heal()`. Other clients (a test's own) keep working. With `status`
        (502, 503, 504) its requests are answered with that status and no `Retry-After` instead,
        as a load balancer with no API server behind it answers. Returns how many streams were
        cut."""
        if status is not None and not 500 <= status <= 599:
            raise ValueError(f"status must be a 5xx, got {status}")
        self._partitioned[user_agent] = status
        cut = [sever for agent, sever in list(self._streams.values()) if user_agent in agent]
        for sever in cut:
            sever()
        return len(cut)

    def heal(self, *, user_agent: str | None = None) -> None:
        """Ends the partition of `user_agent` (None: every partition)."""
        if user_agent is None:
            self._partitioned.clear()
        else:
            self._partitioned.pop(user_agent, None)

    def refuses(self, user_agent: str) -> bool:
        """A partition covers this client (dropped connections or an answered status)."""
        return any(agent in user_agent for agent in self._partitioned)

    def outage_status(self, user_agent: str) -> int | None:
        """The status a partition answers this client's requests with; None when its connections
        are dropped instead (or no partition covers it)."""
        return next(
            (
                status
                for agent, status in self._partitioned.items()
                if agent in user_agent and status is not None
            ),
            None,
        )

    def track_stream(self, user_agent: str, sever: Callable[[], None]) -> Callable[[], None]:
        """Registers an open watch stream (the HTTP layer's hook): `sever()` cuts it when a
        partition covers its client. Returns the function that unregisters it."""
        self._stream_ids += 1
        key = self._stream_ids
        self._streams[key] = (user_agent, sever)

        def untrack() -> None:
            self._streams.pop(key, None)

        return untrack

    @property
    def resource_version(self) -> int:
        return self._store.resource_version

    def open_watches(self) -> int:
        return len(self._store.watchers())

    # --- observations --------------------------------------------------------------------------
    def recorded(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
    ) -> list[RecordedRequest]:
        """Recorded requests matching every given field (`user_agent` matches as a substring)."""
        return [
            r
            for r in self.requests
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (namespace is None or r.namespace == namespace)
            and (name is None or r.name == name)
            and (subresource is None or r.subresource == subresource)
            and (user_agent is None or user_agent in r.user_agent)
        ]

    def warnings(self, *, user_agent: str | None = None) -> list[str]:
        """Every `Warning` header text sent (optionally only to clients whose user agent contains
        this)."""
        return [w for r in self.recorded(user_agent=user_agent) for w in r.warnings]

    def clear_requests(self) -> None:
        self.requests.clear()

    def stored_objects(self) -> Iterator[dict[str, Any]]:
        """Every object the cluster holds now, of every resource (for scans over a whole
        cluster)."""
        yield from self._store.every_object()

    # --- hooks for the HTTP layer ----------------------------------------------------------------
    def record(self, request: RecordedRequest) -> None:
        """Keeps `request` in `requests` and hands it to every `observe_requests` observer."""
        self.requests.append(request)
        for observer in _observers:
            observer(self, request)

    def fault_for(self, method: str, path: str, user_agent: str = "") -> errors.StatusError | None:
        for rule in self._faults:
            if rule.matches(method, path, user_agent) and (
                rule.probability >= 1.0 or self._rng.random() < rule.probability
            ):
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                return errors.from_code(
                    rule.status, rule.message, retry_after_seconds=rule.retry_after
                )
        is_api = path.startswith(("/api/", "/apis/"))
        if (
            is_api
            and method in WRITE_METHODS
            and self.fault_rate > 0
            and self._rng.random() < self.fault_rate
        ):
            return errors.from_code(500, "kubesim: random fault (--fault-rate)")
        return None

    def latency_for(self, method: str, path: str) -> float:
        total = 0.0
        for rule in self._latency:
            if rule.matches(method, path):
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                total += rule.seconds
        return total

    def watch_lifetime(self) -> float | None:
        """How long a new watch stream may live before the fault rate cuts it (None: no random
        cut)."""
        if self.fault_rate <= 0:
            return None
        return self._rng.expovariate(self.fault_rate)
