"""`operator_testing.SteppedClock`, the operator's clock in the elastic tier: real time plus the
test's jumps. Each test waits for the event it expects (a timer's callback); none depends on real
time passing."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from mpi_operator.runtime.types import utc_now
from operator_testing import SteppedClock

CEILING = 10.0
"""For a broken clock: how long a test waits for a timer that should fire at once."""


async def test_a_timer_fires_when_the_clock_is_advanced_past_it_and_not_before() -> None:
    clock = SteppedClock()
    fired: list[str] = []
    done = asyncio.Event()
    clock.call_later(600, lambda: fired.append("grace"))
    clock.call_later(600.5, done.set)
    clock.advance(300)
    clock.call_later(0, lambda: fired.append("now"))  # a due timer runs on the next loop iteration
    sentinel = asyncio.Event()
    clock.call_later(0, sentinel.set)
    await asyncio.wait_for(sentinel.wait(), CEILING)
    assert fired == ["now"], "a timer fired 300 s before its deadline"
    clock.advance(301)
    await asyncio.wait_for(done.wait(), CEILING)
    assert fired == ["now", "grace"]


async def test_due_timers_fire_earliest_first_and_a_cancelled_one_never() -> None:
    clock = SteppedClock()
    fired: list[int] = []
    done = asyncio.Event()
    clock.call_later(200, lambda: fired.append(200))
    cancelled = clock.call_later(100, lambda: fired.append(100))
    clock.call_later(50, lambda: fired.append(50))
    clock.call_later(300, done.set)
    cancelled.cancel()
    clock.advance(1000)
    await asyncio.wait_for(done.wait(), CEILING)
    assert fired == [50, 200]


async def test_sleep_and_wall_time_follow_the_jumps() -> None:
    clock = SteppedClock()
    before = clock.now()
    sleeper = asyncio.create_task(clock.sleep(3600))
    await asyncio.sleep(0)  # the sleeper has armed its timer
    assert not sleeper.done()
    clock.advance(3600)
    await asyncio.wait_for(sleeper, CEILING)
    assert clock.now() - before >= 3600
    assert clock.offset == 3600
    assert clock.utc_now() - utc_now() >= timedelta(seconds=3599)
