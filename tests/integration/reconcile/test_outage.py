"""An API outage for the operator alone (kubesim's `Control.partition` on its user agent; the test's
own client keeps working): a job created during a 20 s outage is acted on within 3 s of healing,
whether the outage drops connections or answers every request 503 without `Retry-After`.

The operator runs on a `FakeClock`. The outage's 20 s pass as fake time, moved on only while every
watch waits out its backoff, so the backoffs grow as in a real outage. After healing, only the
recovery prober sleeps on the clock until it sees the server (the watches' backoffs are timers),
then the watches' short spread: `sleepers=1` is what parked means there.
"""

from __future__ import annotations

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from operator_testing import quick_settings, running_operator

from .harness import NS, OPERATOR_AGENT, mpijob

OUTAGE = 20.0
ACTED_WITHIN = 3.0
NOTICED_WITHIN = 2.0


async def outage(clock: FakeClock, seconds: float, watching: int) -> None:
    """Moves the operator's time `seconds` on, deadline by deadline, each time only once every watch
    waits on a timer again (its backoff): each one fails as often as in a real outage this long, so
    backoffs grow as they would (moving on while some are still being refused would keep theirs
    short)."""
    end = clock.now() + seconds
    while True:
        await clock.parked(sleepers=0, timers=watching)
        deadline = clock.next_deadline
        if deadline is None or deadline > end:
            break
        clock.advance_to_next()
    clock.advance(end - clock.now())


@pytest.mark.parametrize("answer", [None, 503], ids=["refused", "503"])
async def test_a_job_created_during_an_outage_is_acted_on_within_3s_of_healing(
    kubesim: KubeSim, kube: Kube, answer: int | None
) -> None:
    clock = FakeClock()
    async with running_operator(quick_settings(kubesim), clock=clock) as operator:
        watching = len(operator.informers)
        await eventually(
            lambda: kubesim.control.open_watches() >= watching, what="the operator's watches"
        )
        assert kubesim.control.partition(user_agent=OPERATOR_AGENT, status=answer) == watching, (
            "its watches are cut"
        )
        await outage(clock, OUTAGE / 2, watching)
        await kube.create(resources.MPIJOB, mpijob("during", workers=1), namespace=NS)
        await outage(clock, OUTAGE / 2, watching)
        refused = [
            r
            for r in kubesim.control.recorded(user_agent=OPERATOR_AGENT)
            if r.refused or (answer is not None and r.status == answer)
        ]
        assert any(r.verb == "watch" for r in refused), (
            "the operator tried to watch again, and was refused"
        )
        kubesim.control.heal()
        healed = clock.now()

        async def config_map() -> bool:
            try:
                await kube.get(resources.CONFIG_MAP, "during-config", NS)
            except errors.NotFound:
                return False
            return True

        # Every watch back within 2 s: on a backoff alone, one of them at least would still be
        # asleep.
        await clock.run_until(
            eventually(
                lambda: kubesim.control.open_watches() >= watching, what="every watch to resume"
            ),
            sleepers=1,
        )
        assert clock.now() - healed <= NOTICED_WITHIN
        await clock.run_until(
            eventually(config_map, sim=kubesim, what="the job's ConfigMap"), sleepers=1
        )
        assert clock.now() - healed <= ACTED_WITHIN
