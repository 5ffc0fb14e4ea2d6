"""Recovery after an outage: reflectors that lost the API server resume about a second after it is
back, not after a backoff that grew while it was away, with one probe loop however many of them
wait; a server that names its wait (`Retry-After`) gets exactly that.

On a `FakeClock`, against the in-memory `MemoryApi` behind a link that can go down (requests,
probes and open streams then fail with the answer kind under test: no answer, or an HTTP status).
While the reflectors wait, only the prober sleeps on the clock (their backoffs are timers), so
`sleepers=1` is what parked means here.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesim.testing import eventually
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.recovery import PROBE_INTERVAL, PROBE_JITTER, SPREAD, RecoveryProber
from mpi_operator.cache.reflector import Reflector, Transform
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors

from .test_informer import MemoryApi

NAMESPACES = tuple("abcdefgh")
OUTAGE = 20.0
SERVER_ABSENT = {
    "refused": errors.TransientError("connection refused"),
    "502": errors.ServerError(502, "BadGateway"),
    "503": errors.ServerError(503, "ServiceUnavailable"),
    "504": errors.ServerError(504, "GatewayTimeout"),
}
"""Answers that say no API server is there: the prober's business."""


class Sink:
    """A `ReflectorStore` that keeps nothing: the second test looks only at what the reflector
    sends."""

    def replace(self, items: list[dict[str, Any]], resource_version: str) -> None: ...

    def add(self, obj: dict[str, Any]) -> None: ...

    def update(self, obj: dict[str, Any]) -> None: ...

    def delete(self, obj: dict[str, Any]) -> None: ...


class Link:
    """`api` as seen over a connection that `cut()` takes down and `heal()` restores."""

    def __init__(self, api: MemoryApi, clock: FakeClock) -> None:
        self.api = api
        self.clock = clock
        self.down = False
        self.watch_times: list[float] = []
        self.probe_times: list[float] = []
        self.failure: errors.KubeError = errors.TransientError("connection refused")

    def cut(self, failure: errors.KubeError | None = None) -> None:
        self.failure = failure or errors.TransientError("connection reset")
        self.down = True
        self.api.drop_watches()

    def heal(self) -> None:
        self.down = False

    async def list(
        self,
        namespace: str | None,
        label_selector: str | None,
        *,
        transform: Transform | None = None,
    ) -> tuple[list[Any], str]:
        if self.down:
            raise self.failure
        return await self.api.list(namespace, label_selector, transform=transform)

    async def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_times.append(self.clock.now())
        if self.down:
            raise self.failure
        async for event in self.api.watch(namespace, label_selector, resource_version):
            yield event
        if self.down:  # a stream the outage cut, not one the server ended
            raise self.failure

    async def probe(self) -> None:
        self.probe_times.append(self.clock.now())
        if self.down:
            raise self.failure


@pytest.mark.parametrize("answer", SERVER_ABSENT)
async def test_reflectors_resume_within_a_probe_interval_after_the_server_is_back(
    answer: str,
) -> None:
    clock = FakeClock()
    api = MemoryApi()
    link = Link(api, clock)
    prober = RecoveryProber(link.probe, clock=clock, rng=random.Random(7))
    informer = Informer(link, namespaces=NAMESPACES, clock=clock, recovery=prober)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 30)
        link.cut(SERVER_ABSENT[answer])
        # Each step waits for every reflector's backoff timer and the prober's sleep: a reflector
        # woken at 19.9 s must retry (and fail) then, not once the test has healed the link.
        waiting = {"sleepers": 1, "timers": len(NAMESPACES) + 1}
        await clock.run_for(OUTAGE / 2, **waiting)
        for ns in NAMESPACES:  # changes made during the outage
            api.create("during", namespace=ns)
        await clock.run_for(OUTAGE / 2, **waiting)
        during = [t for t in link.watch_times if t > 0]
        assert len(during) <= 6 * len(NAMESPACES), f"the watches kept backing off: {during}"

        link.heal()
        healed = clock.now()
        keys = {f"{ns}/during" for ns in NAMESPACES}

        def resumed_all() -> bool:
            # A watch may resume at the instant of healing: a backoff that fell due as the outage
            # ended (`run_for` fires it, and its reflector runs once the test awaits again).
            watching = len([t for t in link.watch_times if t >= healed]) >= len(NAMESPACES)
            return watching and keys <= set(informer.store.list_keys())

        await clock.run_until(
            eventually(resumed_all, what="the changes made during the outage, and the watches"),
            sleepers=1,
        )
        assert clock.now() - healed <= PROBE_INTERVAL * (1 + PROBE_JITTER) + SPREAD, (
            "resumed a probe and a spread after healing"
        )
        resumed = [t for t in link.watch_times if t >= healed]
        assert len(resumed) == len(set(resumed)) == len(NAMESPACES), (
            f"one watch each, spread apart: {resumed}"
        )
        assert not prober.probing, "probing stopped with the outage"
        assert clock.pending_timers == 0, "nothing left to wake: no probe, no backoff"

        outage_probes = [t for t in link.probe_times if t <= clock.now()]
        gaps = [b - a for a, b in itertools.pairwise(outage_probes)]
        assert min(gaps) >= PROBE_INTERVAL, "one probe a second at most for eight waiting watches"
        assert len(outage_probes) >= OUTAGE / (PROBE_INTERVAL * (1 + PROBE_JITTER))
        assert len(outage_probes) <= OUTAGE / PROBE_INTERVAL + 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await prober.stop()


async def next_watch_after(failure: errors.KubeError) -> tuple[float, RecoveryProber, Link]:
    """How long after `failure` cut its stream a lone reflector watches again; its prober and link
    for a look at what else happened."""
    clock = FakeClock()
    link = Link(MemoryApi(), clock)
    prober = RecoveryProber(link.probe, clock=clock)
    reflector = Reflector(link, Sink(), clock=clock, recovery=prober, rng=random.Random(3))
    task = asyncio.create_task(reflector.run())
    try:
        await clock.run_until(eventually(lambda: reflector.watches == 1, what="the first watch"))
        link.cut(failure)
        cut = clock.now()
        await clock.run_until(eventually(lambda: reflector.watches >= 2, what="a second watch"))
        return link.watch_times[1] - cut, prober, link
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await prober.stop()


@pytest.mark.parametrize(
    "failure",
    [
        errors.TooManyRequests(429, "TooManyRequests", retry_after=5),
        errors.ServerError(503, "ServiceUnavailable", retry_after=5),
        errors.ServerError(500, "InternalError", retry_after=5),
    ],
    ids=["429", "503", "500"],
)
async def test_a_named_wait_is_honoured_exactly_and_probes_nothing(
    failure: errors.ApiError,
) -> None:
    waited, _, link = await next_watch_after(failure)
    assert waited == 5.0, "Retry-After: 5 waits five seconds, neither jittered nor cut short"
    assert link.probe_times == [], "a server that asks for less is not probed"


async def test_a_500_keeps_the_plain_backoff_and_probes_nothing() -> None:
    waited, prober, link = await next_watch_after(errors.ServerError(500, "InternalError"))
    assert 0.8 <= waited <= 1.2, "the backoff's first step (0.8 s, up to half again of jitter)"
    assert link.probe_times == []
    assert not prober.probing


async def test_one_unavailable_answer_alone_is_no_outage() -> None:
    clock = FakeClock()
    prober = RecoveryProber(Link(MemoryApi(), clock).probe, clock=clock)
    unavailable = errors.ServerError(503, "ServiceUnavailable")
    try:
        assert not prober.noticed(unavailable), "once may be a proxy's hiccup"
        prober.answered()
        assert not prober.noticed(unavailable), "an answer in between: still once in a row"
        assert prober.noticed(unavailable), "twice in a row, across requests: no server there"
        assert prober.probing
    finally:
        await prober.stop()
