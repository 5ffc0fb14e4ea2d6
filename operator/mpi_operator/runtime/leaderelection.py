"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's LeaseLock semantics.

`acquire()` tries every `retry_period` (jittered) until the lease is free: absent, released (empty
holder), or unchanged for `leaseDurationSeconds` as seen on our own monotonic clock (never the
holder's timestamps, so clock skew cannot shorten a lease). `renew()` renews every `retry_period`,
each renewal retrying for up to `renew_deadline`, and returns when leadership is lost. Every write
updates the Lease last read at its resourceVersion (a 409: someone wrote in between; re-read).
`release()` clears the holder with `leaseDurationSeconds: 1`, so a standby takes over at once.
All time is the injected clock's, so limits derived from the renew deadline share its scale; what
losing the lease means is the manager's decision (it exits, as upstream).
"""

from __future__ import annotations

import logging
import random
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mpi_operator import flowcontrol
from mpi_operator.flowcontrol import Clock, MonotonicClock
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.types import FatalError

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's `JitterFactor` for the acquire loop: spreads candidates' retries."""


class LeadershipLost(FatalError):
    """The lease could not be renewed within the renew deadline (or someone else holds it now)."""


def new_identity() -> str:
    """client-go's convention: `<hostname>_<uuid>`, unique per process even on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    """How long a standby waits after the last observed change before it may take over."""
    renew_deadline: float = 10.0
    """How long the leader keeps retrying one renewal before it gives up leadership."""
    retry_period: float = 2.0
    """Interval between tries (acquire) and between renewals."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")


def _spec(lease: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (lease or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def holder_of(lease: Mapping[str, Any] | None) -> str:
    return str(_spec(lease).get("holderIdentity") or "")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,  # None for the real clock
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.kube = kube
        self.config = config
        self._clock: Clock = clock or MonotonicClock()
        self._wall_clock = wall_clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._rng = rng
        self._lease: dict[str, Any] | None = None
        """The Lease as last read or written: the base (and resourceVersion) of our next update."""
        self._observed_spec: dict[str, Any] | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self._leading = False

    # --- state -----------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """We won the last election and have not lost or released the lease since."""
        return self._leading

    @property
    def lease(self) -> dict[str, Any] | None:
        """The Lease as last read or written (read-only), e.g. to attach Events to."""
        return self._lease

    @property
    def observed_holder(self) -> str:
        return holder_of({"spec": self._observed_spec})

    def _lease_valid(self) -> bool:
        duration = _spec({"spec": self._observed_spec}).get("leaseDurationSeconds")
        seconds = (
            float(duration) if isinstance(duration, int | float) else self.config.lease_duration
        )
        return self._observed_time + seconds > self._clock.now()

    def _observe(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        spec = dict(_spec(lease))
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_time = self._clock.now()
        holder = holder_of(lease)
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            log.info("lease %s/%s is held by %s", self.config.namespace, self.config.name, holder)
            if self._on_new_leader is not None:
                self._on_new_leader(holder)

    # --- one try ---------------------------------------------------------------------------------
    def _record(
        self, *, acquire_time: str, transitions: int, holder: str, duration: int
    ) -> dict[str, Any]:
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": acquire_time,
            "renewTime": micro_time(self._wall_clock()),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go `tryAcquireOrRenew`): True when we hold the lease afterwards."""
        cfg = self.config
        duration = max(1, round(cfg.lease_duration))
        try:
            lease = await self.kube.get(resources.LEASE, cfg.name, cfg.namespace)
        except errors.NotFound:
            now = micro_time(self._wall_clock())
            body = {
                "apiVersion": resources.LEASE.api_version,
                "kind": resources.LEASE.kind,
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._record(
                    acquire_time=now, transitions=0, holder=cfg.identity, duration=duration
                ),
            }
            try:
                created = await self.kube.create(resources.LEASE, body, cfg.namespace)
            except errors.KubeError as exc:
                # AlreadyExists: another candidate was faster. Anything else (no such namespace, no
                # permission) is worth seeing: this candidate will never lead until it is fixed.
                level = logging.DEBUG if isinstance(exc, errors.AlreadyExists) else logging.WARNING
                log.log(level, "creating lease %s/%s failed: %s", cfg.namespace, cfg.name, exc)
                return False
            self._observe(created)
            return True
        except errors.KubeError as exc:
            log.warning("reading lease %s/%s failed: %s", cfg.namespace, cfg.name, exc)
            return False
        self._observe(lease)
        holder = holder_of(lease)
        ours = holder == cfg.identity
        if holder and not ours and self._lease_valid():
            return False
        spec = _spec(lease)
        transitions = int(spec.get("leaseTransitions") or 0)
        record = self._record(
            acquire_time=str(spec.get("acquireTime") or micro_time(self._wall_clock()))
            if ours
            else micro_time(self._wall_clock()),
            transitions=transitions if ours else transitions + 1,
            holder=cfg.identity,
            duration=duration,
        )
        return await self._update(lease, record)

    async def _update(self, lease: Mapping[str, Any], record: dict[str, Any]) -> bool:
        # PUT of the lease we read: its metadata.resourceVersion makes a concurrent writer's change
        # a 409.
        body = {**lease, "spec": {**_spec(lease), **record}}
        try:
            updated = await self.kube.replace(resources.LEASE, body)
        except errors.KubeError as exc:
            level = logging.DEBUG if isinstance(exc, errors.Conflict) else logging.WARNING
            log.log(
                level,
                "updating lease %s/%s failed: %s",
                self.config.namespace,
                self.config.name,
                exc,
            )
            return False
        self._observe(updated)
        return True

    # --- loops -----------------------------------------------------------------------------------
    async def _try(self, limit: float) -> bool:
        try:
            async with flowcontrol.timeout(self._clock, limit):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning(
                "lease %s/%s: no answer within %.1fs",
                self.config.namespace,
                self.config.name,
                limit,
            )
            return False

    async def acquire(self) -> None:
        """Returns once we hold the lease (then `on_started_leading` has run)."""
        cfg = self.config
        log.info("waiting to acquire lease %s/%s as %s", cfg.namespace, cfg.name, cfg.identity)
        while not await self._try(cfg.renew_deadline):
            await self._clock.sleep(cfg.retry_period * (1.0 + JITTER_FACTOR * self._rng()))
        self._leading = True
        log.info("acquired lease %s/%s", cfg.namespace, cfg.name)
        if self._on_started is not None:
            self._on_started()

    async def renew(self) -> None:
        """Renews every `retry_period` until one renewal fails for `renew_deadline` (then leadership
        is lost: `on_stopped_leading` runs) or until the lease was released; returns then."""
        cfg = self.config
        while True:
            await self._clock.sleep(cfg.retry_period)
            if (
                not self._leading
            ):  # released meanwhile: an empty holder must stay free for a successor
                return
            deadline = self._clock.now() + cfg.renew_deadline
            while not await self._try(max(deadline - self._clock.now(), 0.001)):
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    self._lose()
                    return
                await self._clock.sleep(min(cfg.retry_period, remaining))

    def _lose(self) -> None:
        if not self._leading:
            return
        self._leading = False
        log.error("lost lease %s/%s", self.config.namespace, self.config.name)
        if self._on_stopped is not None:
            self._on_stopped()

    async def release(self) -> bool:
        """Gives the lease up at once (shutdown); False when we were not leading or the write
        failed.

        Call it after `renew()` has stopped. If our cached Lease is stale (a renewal cancelled in
        flight may still have landed: 409), it is re-read once and released if it is still ours."""
        if not self._leading or self._lease is None:
            return False
        self._leading = False
        released = False
        try:
            async with flowcontrol.timeout(self._clock, self.config.renew_deadline):
                released = await self._update(self._lease, self._released_record(self._lease))
                if not released:
                    lease = await self.kube.get(
                        resources.LEASE, self.config.name, self.config.namespace
                    )
                    if holder_of(lease) == self.config.identity:
                        released = await self._update(lease, self._released_record(lease))
        except (TimeoutError, errors.KubeError) as exc:
            log.warning(
                "releasing lease %s/%s failed: %s", self.config.namespace, self.config.name, exc
            )
        if released:
            log.info("released lease %s/%s", self.config.namespace, self.config.name)
        if self._on_stopped is not None:
            self._on_stopped()
        return released

    def _released_record(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        # client-go's release: empty holder, 1 s duration, transitions kept.
        transitions = int(_spec(lease).get("leaseTransitions") or 0)
        now = micro_time(self._wall_clock())
        return self._record(acquire_time=now, transitions=transitions, holder="", duration=1)
