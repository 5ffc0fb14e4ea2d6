"""Fixtures shared by the integration tests of runtime/, kube/ and cache/ (their conftest.py import
these): kubesim without its controllers, the tests' own client (`kube`, overridden where a file
needs other retry or rate settings), `install_mpijob_crd`, and the fake time the runtime runs on
(`fake_clock`, `fake_wall`).

The runtime runs on a `FakeClock` (`fake_clock`): leases, retry periods, backoffs, requeues, rate
limits and grace periods pass only when a test moves that clock, so what the tests assert about time
is exact and holds however slow the machine is. The code under test talks real HTTP to kubesim in
the same event loop, so the loop cannot tell when that code is idle; the clock can tell when it is
parked on the clock, and its drivers (`FakeClock.run_until`, `run_for`, `step`) move time only then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube.client import Kube
from mpi_operator.kube.resources import Resource
from mpi_operator.kube.retry import NO_RETRY

ROOT = Path(__file__).resolve().parents[3]
CRD = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)
"""The wall-clock time at fake time 0."""


@pytest.fixture
def kubesim_run_controllers() -> bool:
    """The runtime tests need only the API server: no kubesim controllers writing beside them."""
    return False


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    """The test's own client: no client-side rate limit and no retries, so each call is one
    request."""
    client = await Kube.from_kubeconfig(
        str(kubesim.kubeconfig_path), qps=0, burst=1, retry=NO_RETRY
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_wall(fake_clock: FakeClock) -> Callable[[], datetime]:
    """A wall clock that moves with `fake_clock` (lease renewTimes, Event timestamps,
    `ManagerDeps.now`)."""
    return lambda: EPOCH + timedelta(seconds=fake_clock.now())


@pytest.fixture
def install_mpijob_crd(kubesim: KubeSim) -> Callable[[Kube], Awaitable[None]]:
    """Creates the MPIJob CRD of `crds/` through the given client and waits until it is
    Established."""

    async def install(kube: Kube) -> None:
        crd = yaml.safe_load((ROOT / "crds" / "kubeflow.org_mpijobs.yaml").read_text())
        await kube.create(CRD, crd)

        async def established() -> bool:
            got = await kube.get(CRD, crd["metadata"]["name"])
            conditions = (got.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        served: bool = await eventually(
            established, what="the MPIJob CRD to be established", sim=kubesim
        )
        assert served

    return install
