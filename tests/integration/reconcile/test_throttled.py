"""An API server under load: with no client-side limit (the default against a server with API
Priority and Fairness, as kubesim is), the operator's pace is the server's. A 429 makes the
reconcile wait out the answer's `Retry-After` on the operator's clock, then send the same write
again, and the job goes on.
"""

from __future__ import annotations

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from operator_testing import SteppedClock, quick_settings, running_operator

from .harness import NS, OPERATOR_AGENT, mpijob

RETRY_AFTER = 40
"""Below the client's 60 s cap on a server's Retry-After, and far beyond any backoff of its own."""


def pod_creates(kubesim: KubeSim) -> list[int | None]:
    return [
        r.status
        for r in kubesim.control.recorded(verb="create", resource="pods", user_agent=OPERATOR_AGENT)
    ]


async def test_a_429_is_waited_out_for_its_retry_after(kubesim: KubeSim, kube: Kube) -> None:
    clock = SteppedClock()
    settings = quick_settings(kubesim, qps=None, burst=None)
    kubesim.control.inject_error(
        429, method="POST", path="/pods$", count=1, retry_after=RETRY_AFTER
    )
    async with running_operator(settings, clock=clock, now=clock.utc_now):
        await kube.create(resources.MPIJOB, mpijob("pi", workers=1), namespace=NS)
        await eventually(
            lambda: pod_creates(kubesim) == [429], sim=kubesim, what="the throttled create"
        )
        # The retry sleeps on the operator's clock until the server said to come back.
        await eventually(
            lambda: any(RETRY_AFTER - 5 < wait <= RETRY_AFTER for wait in clock.waits()),
            what=f"a wait of {RETRY_AFTER} s on the operator's clock",
        )
        assert pod_creates(kubesim) == [429], "nothing sent again before Retry-After"
        clock.advance(RETRY_AFTER)
        await eventually(
            lambda: pod_creates(kubesim) == [429, 201], sim=kubesim, what="the same create again"
        )
        created = await kube.get(resources.POD, "pi-worker-0", NS)
    assert created["metadata"]["name"] == "pi-worker-0"
