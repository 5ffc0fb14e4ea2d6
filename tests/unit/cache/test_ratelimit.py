"""Rate limiters (per-item exponential, token bucket, max-of), the shared TokenBucket, and FakeClock
with its drivers and the clock-measured `flowcontrol.timeout`."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator import flowcontrol
from mpi_operator.cache.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from mpi_operator.flowcontrol import FakeClock, MonotonicClock, TokenBucket


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        (0.005, 1000.0, [0.005, 0.01, 0.02, 0.04, 0.08]),
        (1.0, 5.0, [1.0, 2.0, 4.0, 5.0, 5.0]),
        (0.5, 0.5, [0.5, 0.5, 0.5, 0.5, 0.5]),
    ],
    ids=["client-go-defaults", "capped", "flat"],
)
def test_item_exponential_doubles_per_failure_up_to_the_cap(
    base: float, cap: float, expected: list[float]
) -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base, cap)
    assert [limiter.when("a") for _ in expected] == pytest.approx(expected)
    assert limiter.num_requeues("a") == len(expected)
    assert limiter.when("b") == pytest.approx(base), "failures are counted per item"
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(base)


def test_item_exponential_stays_finite_after_very_many_failures() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(3000)]
    assert delays[-1] == 1000.0
    assert all(math.isfinite(d) for d in delays)


def test_bucket_allows_the_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter[str](qps=10, burst=3, clock=clock)
    assert [limiter.when(k) for k in "abc"] == [0, 0, 0]
    assert [limiter.when(k) for k in "def"] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(1.0)  # refills to the burst, not beyond
    assert [limiter.when(k) for k in "ghij"] == pytest.approx([0, 0, 0, 0.1], abs=1e-9)
    assert limiter.num_requeues("a") == 0


def test_an_urgent_reservation_goes_at_once_on_credit() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock)
    assert [bucket.reserve(), bucket.reserve()] == [0, 0.5]
    assert bucket.reserve(urgent=True) == 0, "not queued behind the reservation outstanding"
    assert bucket.reserve() == pytest.approx(1.5), "the next one waits for the borrowed token too"
    clock.advance(10)
    assert bucket.tokens() == 1, (
        "the average rate holds: the debt is paid off, the burst is not exceeded"
    )


def test_max_of_takes_the_longest_delay_and_forgets_everywhere() -> None:
    clock = FakeClock()
    exponential = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    limiter = MaxOfRateLimiter(exponential, BucketRateLimiter[str](qps=1, burst=1, clock=clock))
    assert limiter.when("a") == pytest.approx(0.005)  # bucket has a token: exponential wins
    assert limiter.when("a") == pytest.approx(1.0)  # bucket empty: it wins
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert exponential.num_requeues("a") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter[str]()


def test_default_controller_limiter_is_client_go_s() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock=clock)
    first = [limiter.when(f"k{i}") for i in range(100)]
    assert first == pytest.approx([0.005] * 100), "burst of 100 distinct keys is not throttled"
    assert limiter.when("k100") == pytest.approx(0.1), "then 10 qps"


async def test_token_bucket_wait_sleeps_until_its_token_and_cancel_refunds_it() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock)
    await bucket.wait()  # the burst token
    waiter = asyncio.create_task(bucket.wait())
    await clock.parked()
    assert clock.next_deadline == 0.5
    clock.advance(0.49)
    assert not waiter.done()
    clock.advance(0.01)
    await asyncio.wait_for(waiter, 30)
    cancelled = asyncio.create_task(bucket.wait())
    await clock.parked()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    clock.advance(0.5)
    assert bucket.try_accept(), "the cancelled waiter's reservation was given back"
    assert not bucket.try_accept()


@pytest.mark.parametrize("qps", [0.0, -1.0, math.inf], ids=["zero", "negative", "infinite"])
def test_token_bucket_without_a_positive_finite_qps_is_unlimited(qps: float) -> None:
    bucket = TokenBucket(qps=qps, burst=1, clock=FakeClock())
    assert bucket.unlimited
    assert all(bucket.reserve() == 0 for _ in range(1000))


@given(
    qps=st.floats(min_value=0.5, max_value=100),
    burst=st.integers(min_value=1, max_value=50),
    gaps=st.lists(st.floats(min_value=0, max_value=0.5), min_size=1, max_size=200),
)
def test_token_bucket_never_grants_more_than_burst_plus_qps_times_elapsed(
    qps: float, burst: int, gaps: list[float]
) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=qps, burst=burst, clock=clock)
    usable_at = []
    for gap in gaps:
        clock.advance(gap)
        usable_at.append(clock.now() + bucket.reserve())
    usable_at.sort()
    for n, t in enumerate(usable_at, start=1):
        assert n <= burst + qps * t + 1e-6


def test_fake_clock_fires_timers_in_deadline_order_and_skips_cancelled_ones() -> None:
    clock = FakeClock(start=100.0)
    fired: list[tuple[str, float]] = []
    clock.call_later(2, lambda: fired.append(("b", clock.now())))
    clock.call_later(1, lambda: fired.append(("a", clock.now())))
    clock.call_later(1.5, lambda: fired.append(("x", clock.now()))).cancel()

    def schedule_nested() -> None:
        clock.call_later(0.5, lambda: fired.append(("nested", clock.now())))

    clock.call_later(1, schedule_nested)
    clock.advance(5)
    assert fired == [("a", 101.0), ("nested", 101.5), ("b", 102.0)]
    assert clock.now() == 105.0
    assert clock.pending_timers == 0


async def test_fake_clock_counts_a_sleeper_only_until_its_time_comes() -> None:
    clock = FakeClock()
    sleeping = [asyncio.create_task(clock.sleep(d)) for d in (1.0, 2.0)]
    await clock.wait_for_sleepers(2)
    assert (clock.sleepers, clock.next_deadline) == (2, 1.0)
    assert clock.advance_to_next() == 1.0
    # Woken but not yet resumed: no longer counted, so a driver waits for it to park again.
    assert clock.sleepers == 1
    await sleeping[0]
    sleeping[1].cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeping[1]
    assert (clock.sleepers, clock.pending_timers, clock.next_deadline) == (0, 0, None)
    with pytest.raises(LookupError):
        clock.advance_to_next()


async def test_fake_clock_run_until_moves_time_exactly_as_far_as_the_code_waits() -> None:
    clock = FakeClock()
    ticks: list[float] = []

    async def ticker(period: float, count: int) -> str:
        for _ in range(count):
            await clock.sleep(period)
            ticks.append(clock.now())
        return "done"

    assert await clock.run_until(ticker(1.5, 3)) == "done"
    assert ticks == [1.5, 3.0, 4.5]
    assert clock.now() == 4.5


async def test_fake_clock_run_for_steps_through_every_deadline_and_stops_with_the_code_parked() -> (
    None
):
    clock = FakeClock()
    ticks: list[tuple[str, float]] = []

    async def ticker(name: str, period: float) -> None:
        while True:
            await clock.sleep(period)
            ticks.append((name, clock.now()))

    tasks = [asyncio.create_task(ticker("two", 2.0)), asyncio.create_task(ticker("three", 3.0))]
    try:
        await clock.run_for(6.5, sleepers=2)
        assert clock.now() == 6.5
        assert clock.sleepers == 2
        assert sorted(ticks, key=lambda t: (t[1], t[0])) == [
            ("two", 2.0),
            ("three", 3.0),
            ("two", 4.0),
            ("three", 6.0),
            ("two", 6.0),
        ]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_fake_clock_flowing_lets_every_wait_pass_at_once() -> None:
    clock = FakeClock()
    async with clock.flowing():
        await clock.sleep(3600.0)
        await clock.sleep(60.0)
    assert clock.now() == 3660.0


async def test_timeout_on_a_fake_clock_expires_only_when_the_clock_gets_there() -> None:
    clock = FakeClock()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def guarded() -> None:
        async with flowcontrol.timeout(clock, 10.0):
            await never

    task = asyncio.create_task(guarded())
    await clock.wait_for_timers(1)
    clock.advance(9.0)
    assert not task.done()
    clock.advance(1.0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, 30)
    async with flowcontrol.timeout(
        clock, 10.0
    ):  # a block that finishes in time leaves no timer behind
        pass
    assert clock.pending_timers == 0


async def test_timeout_on_the_real_clock_is_asyncio_timeout() -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        async with flowcontrol.timeout(MonotonicClock(), 0.01):
            await never


def _on_loop(name: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    import uvloop

    factory = uvloop.new_event_loop if name == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_real_clock_never_ends_a_timer_or_a_sleep_before_its_deadline(loop: str) -> None:
    """uvloop's timers count whole milliseconds from a time cached per loop iteration and can fire
    early; `mpi-operator run` runs on it, and a held status write was once skipped for good when its
    requeue came before the echo window it closed had ended."""
    clock = MonotonicClock()
    early: list[tuple[str, float, float]] = []

    async def main() -> None:
        for i in range(300):
            delay = 0.0004 * (i % 8)  # 0 to 2.8 ms: below, at and across one millisecond
            deadline = time.monotonic() + delay
            fired: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            clock.call_later(delay, lambda fired=fired: fired.set_result(time.monotonic()))
            if (at := await fired) < deadline:
                early.append(("timer", delay, deadline - at))
            deadline = time.monotonic() + delay
            await clock.sleep(delay)
            if (at := time.monotonic()) < deadline:
                early.append(("sleep", delay, deadline - at))

    _on_loop(loop, main)
    assert early == []


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_cancelled_real_timer_never_runs(loop: str) -> None:
    clock = MonotonicClock()
    ran: list[int] = []

    async def main() -> None:
        timers = [clock.call_later(0.001 * (i % 4), lambda i=i: ran.append(i)) for i in range(40)]
        for timer in timers[::2]:
            timer.cancel()
        await clock.sleep(0.05)

    _on_loop(loop, main)
    assert sorted(ran) == list(range(1, 40, 2))


async def test_fake_clock_run_until_gives_up_on_code_that_never_finishes() -> None:
    clock = FakeClock()

    async def forever() -> None:
        while True:
            await clock.sleep(1.0)

    with pytest.raises(TimeoutError, match=r"not done after 10\.0 s of fake time"):
        await clock.run_until(forever(), at_most=10.0)
    assert clock.now() == 10.0
    assert clock.sleepers == 0, "the coroutine it wrapped was cancelled"
