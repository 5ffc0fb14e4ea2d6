"""Leader election over real HTTP against kubesim: one leader at a time, fast hand-over on release,
takeover within the lease duration after a crash, optimistic concurrency, and faults on the Lease."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from mpi_operator.controller import leaderelection
from mpi_operator.controller.leaderelection import LeaderElectionConfig, LeaderElector
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.kube.retry import NO_RETRY

NS = "default"
LEASE = "mpi-operator"
LEASE_DURATION = 1.0
RENEW_DEADLINE = 0.6
RETRY_PERIOD = 0.15


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    client = await Kube.from_kubeconfig(
        str(kubesim.kubeconfig_path), qps=0, burst=1, retry=NO_RETRY, request_timeout=2.0
    )
    try:
        yield client
    finally:
        await client.close()


class Candidate:
    """One elector plus a log of its callbacks."""

    def __init__(self, kube: Kube, identity: str) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            kube,
            LeaderElectionConfig(LEASE, NS, identity, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
            on_started_leading=lambda: self.events.append("started"),
            on_stopped_leading=lambda: self.events.append("stopped"),
        )


@pytest_asyncio.fixture
async def spawn(kube: Kube) -> AsyncIterator[Callable[[str], Candidate]]:
    yield lambda identity: Candidate(kube, identity)


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
    kube: Kube, spawn: Callable[[str], Candidate]
) -> None:
    a, b = spawn("a"), spawn("b")
    await asyncio.wait_for(a.elector.acquire(), 2)
    spec = await lease_spec(kube)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 1
    async with running(a.elector.renew()), running(b.elector.acquire()) as waiting:
        await asyncio.sleep(LEASE_DURATION * 2)  # a keeps renewing, so b never gets it
        assert not waiting.done()
        assert not b.elector.is_leader
        assert b.elector.observed_holder == "a"
        first_renewal = (await lease_spec(kube))["renewTime"]
        assert first_renewal != spec["renewTime"]
        assert (await lease_spec(kube))["acquireTime"] == spec["acquireTime"]
        released_at = time.monotonic()
        assert await a.elector.release()
        await asyncio.wait_for(waiting, LEASE_DURATION)
        handover = time.monotonic() - released_at
    assert handover < LEASE_DURATION  # an empty holder is free at once, no lease to wait out
    assert a.events == ["started", "stopped"]
    assert b.events == ["started"]
    spec = await lease_spec(kube)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


async def test_crashed_leader_is_replaced_within_the_lease_duration(
    kube: Kube, spawn: Callable[[str], Candidate]
) -> None:
    a, b = spawn("a"), spawn("b")
    await a.elector.acquire()
    async with running(a.elector.renew()) as renewing, running(b.elector.acquire()) as waiting:
        await asyncio.sleep(3 * RETRY_PERIOD)
        renewing.cancel()  # a "crashes": no release, the lease simply stops being renewed
        crashed_at = time.monotonic()
        await asyncio.wait_for(waiting, LEASE_DURATION + 1.0)
        takeover = time.monotonic() - crashed_at
    # The standby sees the last renewal up to one (jittered) poll late and notices the expiry up to one
    # poll late: lease duration plus two polls at most; and never before the lease could have run out.
    poll = (1 + leaderelection.JITTER_FACTOR) * RETRY_PERIOD
    assert LEASE_DURATION - RETRY_PERIOD - 0.05 < takeover < LEASE_DURATION + 2 * poll + 0.3
    spec = await lease_spec(kube)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


async def test_leader_that_loses_the_lease_to_another_holder_stops_leading(
    kube: Kube, kubesim: KubeSim, spawn: Callable[[str], Candidate]
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    lease = await kube.get(resources.LEASE, LEASE, NS)
    stolen = {**lease, "spec": {**lease["spec"], "holderIdentity": "thief", "leaseDurationSeconds": 30}}
    await kube.replace(resources.LEASE, stolen)
    started = time.monotonic()
    await asyncio.wait_for(a.elector.renew(), RENEW_DEADLINE + 2)  # returns only when leadership is lost
    assert not a.elector.is_leader
    assert time.monotonic() - started < RETRY_PERIOD + RENEW_DEADLINE + 0.5
    assert a.events == ["started", "stopped"]
    assert not await a.elector.release()  # not ours any more: never overwrite the thief
    assert (await lease_spec(kube))["holderIdentity"] == "thief"


async def test_conflicting_write_between_read_and_update_is_retried_next_period(
    kube: Kube, kubesim: KubeSim, spawn: Callable[[str], Candidate]
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    kubesim.control.clear_requests()
    rule = kubesim.control.inject_error(409, method="PUT", path=f"/leases/{LEASE}$", count=2)
    # A benign concurrent writer: the leader's next read sees a new resourceVersion and keeps the lease.
    await kube.patch(resources.LEASE, LEASE, {"metadata": {"annotations": {"x": "y"}}}, namespace=NS)
    async with running(a.elector.renew()):
        await asyncio.sleep(RETRY_PERIOD * 6)
        assert a.elector.is_leader
    assert rule.hits == 2
    updates = kubesim.control.recorded(verb="update", resource="leases")
    assert [r.status for r in updates[:3]] == [409, 409, 200]
    assert a.events == ["started"]
    assert (await lease_spec(kube))["holderIdentity"] == "a"


@pytest.mark.parametrize(
    ("count", "keeps_lease"),
    [(2, True), (None, False)],
    ids=["brief-outage-within-renew-deadline", "outage-beyond-renew-deadline"],
)
async def test_server_errors_on_the_lease(
    kubesim: KubeSim, spawn: Callable[[str], Candidate], count: int | None, keeps_lease: bool
) -> None:
    a = spawn("a")
    await a.elector.acquire()
    kubesim.control.inject_error(500, method="PUT", path=f"/leases/{LEASE}$", count=count)
    renewing = asyncio.ensure_future(a.elector.renew())
    done, _ = await asyncio.wait({renewing}, timeout=RETRY_PERIOD + RENEW_DEADLINE + 1.0)
    if keeps_lease:
        assert not done
        assert a.elector.is_leader
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        assert a.events == ["started"]
    else:
        assert renewing in done
        assert renewing.exception() is None
        assert not a.elector.is_leader
        assert a.events == ["started", "stopped"]


async def test_candidate_keeps_trying_while_the_lease_endpoint_fails(
    kube: Kube, kubesim: KubeSim, spawn: Callable[[str], Candidate]
) -> None:
    kubesim.control.inject_error(503, method="GET", path=f"/leases/{LEASE}$", count=3)
    a = spawn("a")
    await asyncio.wait_for(a.elector.acquire(), 5)
    assert a.elector.is_leader
    gets = kubesim.control.recorded(verb="get", resource="leases")
    assert [r.status for r in gets[:4]] == [503, 503, 503, 404]
    assert (await lease_spec(kube))["holderIdentity"] == "a"


async def test_release_with_a_stale_cached_lease_rereads_it_once(
    kube: Kube, kubesim: KubeSim, spawn: Callable[[str], Candidate]
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
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, 0)
