"""Leader election over real HTTP against kubesim: one leader at a time, fast hand-over on release,
takeover within the lease duration after a crash, optimistic concurrency, and faults on the Lease.

Time is a `FakeClock` (the lease, renew deadline and retry period are client-go's defaults), so
every hand-over, takeover and loss is asserted at the exact fake time the algorithm implies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

import pytest

from kubesim.app import KubeSim
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime import leaderelection
from mpi_operator.runtime.leaderelection import LeaderElectionConfig, LeaderElector, micro_time

NS = "default"
LEASE = "mpi-operator"
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


class Candidate:
    """One elector on the fake clock plus a log of its callbacks, each with the fake time it ran
    at."""

    def __init__(
        self,
        kube: Kube,
        identity: str,
        clock: FakeClock,
        wall: Callable[[], datetime],
        jitter: float,
    ) -> None:
        self.events: list[tuple[str, float]] = []
        self.jitter = jitter
        self.elector = LeaderElector(
            kube,
            LeaderElectionConfig(LEASE, NS, identity, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
            clock=clock,
            wall_clock=wall,
            on_started_leading=lambda: self.events.append(("started", clock.now())),
            on_stopped_leading=lambda: self.events.append(("stopped", clock.now())),
            rng=lambda: jitter,
        )

    @property
    def poll_period(self) -> float:
        """Its acquire loop's period: the retry period stretched by its (fixed) jitter."""
        return RETRY_PERIOD * (1.0 + leaderelection.JITTER_FACTOR * self.jitter)

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def at(self, name: str) -> float:
        return next(t for n, t in self.events if n == name)


Spawn = Callable[..., Candidate]


@pytest.fixture
def spawn(kube: Kube, fake_clock: FakeClock, fake_wall: Callable[[], datetime]) -> Spawn:
    def make(identity: str, jitter: float = 0.0) -> Candidate:
        return Candidate(kube, identity, fake_clock, fake_wall, jitter)

    return make


@contextlib.asynccontextmanager
async def running(aw: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.ensure_future(aw)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, leaderelection.LeadershipLost):
            await task


async def lease_spec(kube: Kube) -> dict[str, object]:
    lease = await kube.get(resources.LEASE, LEASE, NS)
    return dict(lease["spec"])


def first_poll_at_or_after(moment: float, period: float) -> float:
    """The acquire loop polls at 0, period, 2 * period, ... (each try takes no fake time)."""
    k = 0
    while k * period < moment:
        k += 1
    return k * period


def test_identity_is_hostname_underscore_uuid() -> None:
    a, b = leaderelection.new_identity(), leaderelection.new_identity()
    host, sep, suffix = a.rpartition("_")
    assert sep
    assert host
    assert len(suffix) == 36
    assert a != b


def test_config_rejects_inconsistent_durations() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElectionConfig(LEASE, NS, "x", lease_duration=1, renew_deadline=2, retry_period=0.5)


async def test_one_leads_the_other_waits_then_takes_over_at_once_on_release(
    kube: Kube,
    kubesim: KubeSim,
    fake_clock: FakeClock,
    fake_wall: Callable[[], datetime],
    spawn: Spawn,
) -> None:
    a, b = spawn("a"), spawn("b")
    await a.elector.acquire()
    spec = await lease_spec(kube)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 15
    kubesim.control.clear_requests()
    async with running(a.elector.renew()), running(b.elector.acquire()) as waiting:
        await fake_clock.run_for(
            2 * LEASE_DURATION, sleepers=2
        )  # a keeps renewing, so b never gets it
        assert not waiting.done()
        assert not b.elector.is_leader
        assert b.elector.observed_holder == "a"
        renewals = kubesim.control.recorded(verb="update", resource="leases")
        assert [r.status for r in renewals] == [200] * int(2 * LEASE_DURATION / RETRY_PERIOD)
        now = await lease_spec(kube)
        assert now["renewTime"] == micro_time(fake_wall())  # renewed at this very (fake) moment
        assert now["acquireTime"] == spec["acquireTime"]
        released_at = fake_clock.now()
        assert await a.elector.release()
        await fake_clock.run_until(waiting, sleepers=1)
    # An empty holder is free at once: b takes it at its next poll, with no lease to wait out.
    assert b.at("started") == pytest.approx(released_at + RETRY_PERIOD)
    assert a.names() == ["started", "stopped"]
    assert a.at("stopped") == released_at
    assert b.names() == ["started"]
    spec = await lease_spec(kube)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


async def test_crashed_leader_is_replaced_within_the_lease_duration(
    kube: Kube, fake_clock: FakeClock, spawn: Spawn
) -> None:
    # b's jitter keeps its polls off a's renewal instants, so which renewal it saw first is certain.
    a, b = spawn("a"), spawn("b", jitter=0.25)
    await a.elector.acquire()
    async with running(a.elector.renew()) as renewing, running(b.elector.acquire()) as waiting:
        await fake_clock.run_for(3 * RETRY_PERIOD, sleepers=2)
        last_renewal = fake_clock.now()
        renewing.cancel()  # a "crashes": no release, the lease simply stops being renewed
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await fake_clock.run_until(waiting, sleepers=1)
    # b measures the lease on its own clock from when it SAW the last renewal (its next poll), never
    # from the holder's timestamps, and takes over at its first poll once that lease has run out.
    seen = first_poll_at_or_after(last_renewal, b.poll_period)
    expected = first_poll_at_or_after(seen + LEASE_DURATION, b.poll_period)
    assert b.at("started") == pytest.approx(expected)
    assert LEASE_DURATION <= b.at("started") - last_renewal <= LEASE_DURATION + 2 * b.poll_period
    spec = await lease_spec(kube)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


async def test_leader_that_loses_the_lease_to_another_holder_stops_leading(
    kube: Kube, fake_clock: FakeClock, spawn: Spawn
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    lease = await kube.get(resources.LEASE, LEASE, NS)
    stolen = {
        **lease,
        "spec": {**lease["spec"], "holderIdentity": "thief", "leaseDurationSeconds": 30},
    }
    await kube.replace(resources.LEASE, stolen)
    await fake_clock.run_until(a.elector.renew())  # returns only when leadership is lost
    assert not a.elector.is_leader
    # The first renewal (one retry period in) finds the thief; it keeps trying until the renew
    # deadline.
    assert a.events == [("started", 0.0), ("stopped", RETRY_PERIOD + RENEW_DEADLINE)]
    assert not await a.elector.release()  # not ours any more: never overwrite the thief
    assert (await lease_spec(kube))["holderIdentity"] == "thief"


async def test_conflicting_write_between_read_and_update_is_retried_next_period(
    kube: Kube, kubesim: KubeSim, fake_clock: FakeClock, spawn: Spawn
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    kubesim.control.clear_requests()
    rule = kubesim.control.inject_error(409, method="PUT", path=f"/leases/{LEASE}$", count=2)
    # A benign concurrent writer: the leader's next read sees a new resourceVersion and keeps the
    # lease.
    await kube.patch(
        resources.LEASE, LEASE, {"metadata": {"annotations": {"x": "y"}}}, namespace=NS
    )
    async with running(a.elector.renew()):
        await fake_clock.run_for(6 * RETRY_PERIOD)
        assert a.elector.is_leader
    assert rule.hits == 2
    updates = kubesim.control.recorded(verb="update", resource="leases")
    assert [r.status for r in updates] == [409, 409, 200, 200, 200, 200]  # one try per retry period
    assert a.names() == ["started"]
    assert (await lease_spec(kube))["holderIdentity"] == "a"


@pytest.mark.parametrize(
    ("count", "keeps_lease"),
    [(2, True), (None, False)],
    ids=["brief-outage-within-renew-deadline", "outage-beyond-renew-deadline"],
)
async def test_server_errors_on_the_lease(
    kubesim: KubeSim, fake_clock: FakeClock, spawn: Spawn, count: int | None, keeps_lease: bool
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    kubesim.control.inject_error(500, method="PUT", path=f"/leases/{LEASE}$", count=count)
    async with running(a.elector.renew()) as renewing:
        if keeps_lease:
            await fake_clock.run_for(RETRY_PERIOD + RENEW_DEADLINE + RETRY_PERIOD)
            assert not renewing.done()
            assert a.elector.is_leader
            updates = kubesim.control.recorded(verb="update", resource="leases")
            assert [r.status for r in updates] == [
                500,
                500,
                200,
                200,
                200,
                200,
                200,
            ]  # every 2 s to 14 s
        else:
            await fake_clock.run_until(renewing)
            assert not a.elector.is_leader
    if keeps_lease:
        assert a.names() == ["started"]
    else:
        assert a.events == [("started", 0.0), ("stopped", RETRY_PERIOD + RENEW_DEADLINE)]


async def test_candidate_keeps_trying_while_the_lease_endpoint_fails(
    kube: Kube, kubesim: KubeSim, fake_clock: FakeClock, spawn: Spawn
) -> None:
    kubesim.control.inject_error(503, method="GET", path=f"/leases/{LEASE}$", count=3)
    a = spawn("a", jitter=0.5)
    await fake_clock.run_until(a.elector.acquire())
    assert a.elector.is_leader
    assert a.at("started") == pytest.approx(3 * a.poll_period)  # three failed polls, jittered alike
    gets = kubesim.control.recorded(verb="get", resource="leases")
    assert [r.status for r in gets[:4]] == [503, 503, 503, 404]
    assert (await lease_spec(kube))["holderIdentity"] == "a"


async def test_release_with_a_stale_cached_lease_rereads_it_once(
    kube: Kube, kubesim: KubeSim, spawn: Spawn
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    # Someone else's write after our last renewal: our cached resourceVersion is stale now.
    await kube.patch(resources.LEASE, LEASE, {"metadata": {"labels": {"x": "y"}}}, namespace=NS)
    kubesim.control.clear_requests()
    assert await a.elector.release()
    updates = kubesim.control.recorded(verb="update", resource="leases")
    assert [r.status for r in updates] == [409, 200]
    spec = await lease_spec(kube)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (
        "",
        1,
        0,
    )
