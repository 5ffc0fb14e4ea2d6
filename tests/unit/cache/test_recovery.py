"""Recovery after an outage: reflectors that lost the API server resume about a second after it is
back, not after a backoff that grew while it was away, with one probe loop however many of them
wait.

On a `FakeClock`, against the in-memory `MemoryApi` behind a link that can go down (requests and
open streams then fail as a lost connection does: `TransientError`). While the reflectors wait, only
the prober sleeps on the clock (their backoffs are timers), so `sleepers=1` is what parked means
here.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from typing import Any

from kubesim.testing import eventually
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.recovery import PROBE_INTERVAL, SPREAD, RecoveryProber
from mpi_operator.cache.reflector import Reflector, Transform
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors

from .test_informer import MemoryApi

NAMESPACES = ("a", "b", "c")
OUTAGE = 20.0


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
            raise errors.TransientError("connection refused")


async def test_reflectors_resume_within_a_probe_interval_after_the_server_is_back() -> None:
    clock = FakeClock()
    api = MemoryApi()
    link = Link(api, clock)
    prober = RecoveryProber(link.probe, clock=clock, rng=random.Random(7))
    informer = Informer(link, namespaces=NAMESPACES, clock=clock, recovery=prober)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 30)
        link.cut()
        await clock.run_for(OUTAGE / 2, sleepers=1)
        for ns in NAMESPACES:  # changes made during the outage
            api.create("during", namespace=ns)
        await clock.run_for(OUTAGE / 2, sleepers=1)
        during = [t for t in link.watch_times if t > 0]
        assert len(during) <= 6 * len(NAMESPACES), f"the watches kept backing off: {during}"

        link.heal()
        healed = clock.now()
        keys = {f"{ns}/during" for ns in NAMESPACES}
        await clock.run_until(
            eventually(
                lambda: keys <= set(informer.store.list_keys()),
                what="the changes made during the outage",
            ),
            sleepers=1,
        )
        assert clock.now() - healed <= PROBE_INTERVAL + SPREAD, (
            "resumed a probe and a spread after healing"
        )
        resumed = [t for t in link.watch_times if t > healed]
        assert len(set(resumed)) == len(NAMESPACES), f"one watch each, spread apart: {resumed}"
        assert not prober.probing, "probing stopped with the outage"
        assert clock.pending_timers == 0, "nothing left to wake: no probe, no backoff"

        outage_probes = [t for t in link.probe_times if t <= clock.now()]
        gaps = [b - a for a, b in itertools.pairwise(outage_probes)]
        assert min(gaps) >= PROBE_INTERVAL / 2, "one probe loop for three waiting watches"
        assert OUTAGE / PROBE_INTERVAL <= len(outage_probes) <= 2 * OUTAGE / PROBE_INTERVAL + 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await prober.stop()


async def test_an_error_answer_keeps_the_plain_backoff_and_probes_nothing() -> None:
    clock = FakeClock()
    api = MemoryApi()
    link = Link(api, clock)
    prober = RecoveryProber(link.probe, clock=clock)
    reflector = Reflector(link, Sink(), clock=clock, recovery=prober, rng=random.Random(3))
    task = asyncio.create_task(reflector.run())
    try:
        await clock.run_until(eventually(lambda: reflector.watches == 1, what="the first watch"))
        link.cut(
            errors.ServerError(503, "ServiceUnavailable")
        )  # the server is there: it asks for less
        await clock.parked(sleepers=1)  # the reflector's backoff, a plain sleep
        assert not prober.probing
        assert link.probe_times == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await prober.stop()
