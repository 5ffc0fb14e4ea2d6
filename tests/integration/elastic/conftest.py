"""The elastic tier: the reconcile tier's fast kubesim with a volume sync that never comes within a
test (`harness.VOLUME_SYNC_SECONDS`), so a launcher's mounted `discover_hosts.sh` that changes
proves the operator's launcher touch; and the operator on a `SteppedClock` (`clock`), so scale-in
graces, replacement pacing and below-minReplicas timeouts pass when a test moves the clock past
them."""

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import operator_testing
from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import VOLUME_SYNC_SECONDS


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return operator_testing.fast_sim_settings(volume_sync_seconds=VOLUME_SYNC_SECONDS)


@pytest.fixture
def clock() -> operator_testing.SteppedClock:
    return operator_testing.SteppedClock()


@pytest_asyncio.fixture
async def operator(
    kubesim: KubeSim, kube: Kube, clock: operator_testing.SteppedClock
) -> AsyncIterator[Manager]:
    """The operator of tests/conftest.py, on `clock`."""
    settings = operator_testing.quick_settings(kubesim)
    async with operator_testing.running_operator(settings, clock=clock, now=clock.utc_now) as mgr:
        yield mgr
