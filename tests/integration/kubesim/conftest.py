"""Fixtures the kubesim integration tests share.

`clock` is a `FakeClock` for the simulated controllers: a module whose tests are about time (start
delays, restart back-offs, termination grace, Job back-offs and TTLs, volume sync periods) runs its
cluster on it by overriding `kubesim_settings` with `SimSettings(clock=clock, ...)`, then moves time
with `await clock.advance(seconds)` and waits for the controllers with `await clock.settle()`: what
a test checks then does not depend on how fast the machine is. `sim` is the `kubesim` fixture's
cluster under the name those modules use; `sim_http` is an HTTP session on its URL (kubesim's own
endpoints, raw requests); `open_watches` waits until a watch a test started is being served.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import pytest_asyncio

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.testing import eventually


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(kubesim: KubeSim) -> KubeSim:
    """The `kubesim` fixture's cluster, running with the module's `kubesim_settings`."""
    return kubesim


@pytest_asyncio.fixture
async def sim_http(sim: KubeSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(sim.url) as session:
        yield session


@pytest.fixture
def open_watches(kubesim: KubeSim) -> Callable[[int], Awaitable[None]]:
    """`await open_watches(n)` returns once kubesim serves exactly `n` watch streams: a change the
    test makes next reaches a watch it started as a live event, not by replay; `open_watches(0)`
    waits for the watches a test ended to be gone. Uses kubesim's control handle (mark the test
    `kubesim_control`)."""

    async def wait(count: int) -> None:
        # Opening or ending a watch commits nothing to the cluster, so there is no change to wake
        # on.
        await eventually(
            lambda: kubesim.control.open_watches() == count, what=f"{count} open watches"
        )

    return wait
