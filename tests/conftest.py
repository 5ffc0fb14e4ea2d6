"""Fixtures shared by more than one tier: a test client with the MPIJob CRD installed (`kube`), the
real operator running against the test's kubesim (`operator`) and an HTTP session (`http`); their
users are the reconcile and elastic integration tiers and the Horovod tier.

Every async test is also checked for asyncio tasks it leaves running (`task_leaks`). At the end of
the session, every request the operator sent is checked against deploy/'s RBAC (`request_audit`),
and no private key may appear outside Secrets in any test's output or cluster (`secret_audit`)."""

from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio
from hypothesis import settings

import operator_testing
from kubesim.app import KubeSim
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

pytest_plugins = ["kubesim.testing", "task_leaks", "request_audit", "secret_audit"]

# Hypothesis fails an example that takes longer than 200 ms by default: a wall-clock bound that a
# loaded 2-core machine breaks (it did, in tests/unit/kubesim/test_patch.py). Examples are bounded
# by their count instead.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


@pytest_asyncio.fixture
async def kube(kubesim: KubeSim) -> AsyncIterator[Kube]:
    """The test's own client (user agent `rc-test`, told apart from the operator's in kubesim's
    request record), with the MPIJob CRD installed and established."""
    async with operator_testing.mpijob_client(kubesim) as client:
        yield client


@pytest_asyncio.fixture
async def operator(kubesim: KubeSim, kube: Kube) -> AsyncIterator[Manager]:
    """The operator (manager + MPIJob reconciler) started against kubesim; stopped and awaited
    after."""
    async with operator_testing.running_operator(operator_testing.quick_settings(kubesim)) as mgr:
        yield mgr


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
