"""`mpi-operator run` as a process through a 20 s outage in which every request it sends is answered
`503 Service Unavailable` without `Retry-After` (kubesim's `Control.partition(status=503)`: a load
balancer with no API server behind it) and its watches are cut: a `Worker.replicas` change made
during the outage is acted on within 3 s of healing. Real time, as on a cluster; the fake-clock
twin of this test, with each answer kind, is tests/integration/reconcile/test_outage.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import DEFAULT_USER_AGENT, Kube
from operator_testing import operator_process, plain_mpijob

OUTAGE = 20.0
ACTED_WITHIN = 3.0
NS = "default"


async def has_pod(kube: Kube, name: str) -> bool:
    try:
        await kube.get(resources.POD, name, NS)
    except errors.NotFound:
        return False
    return True


@pytest.mark.timeout(180)
async def test_a_change_made_during_an_outage_of_503s_is_acted_on_within_3s_of_healing(
    kubesim: KubeSim, kube: Kube, tmp_path: Path
) -> None:
    async with operator_process(kubesim.kubeconfig_path, tmp_path / "operator.log") as proc:
        await kube.create(resources.MPIJOB, plain_mpijob("pi", workers=1), namespace=NS)
        await eventually(
            lambda: has_pod(kube, "pi-worker-0"), within=60, sim=kubesim, what="the first worker"
        )
        kubesim.control.partition(user_agent=DEFAULT_USER_AGENT, status=503)
        # The outage itself takes time: these sleeps are its length, not a wait for an event.
        await asyncio.sleep(OUTAGE / 2)
        await kube.patch(
            resources.MPIJOB,
            "pi",
            {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}},
            namespace=NS,
        )
        await asyncio.sleep(OUTAGE / 2)
        answered = kubesim.control.recorded(user_agent=DEFAULT_USER_AGENT)
        assert any(r.verb == "watch" and r.status == 503 for r in answered), (
            "the operator tried to watch again, and was answered 503"
        )
        assert not await has_pod(kube, "pi-worker-1"), "nothing got through the outage"
        kubesim.control.heal()
        healed = time.monotonic()
        await eventually(
            lambda: has_pod(kube, "pi-worker-1"), within=30, sim=kubesim, what="the second worker"
        )
        took = time.monotonic() - healed
        assert proc.returncode is None, "the operator rode the outage out"
        assert took <= ACTED_WITHIN, f"acted on {took:.1f} s after healing"
