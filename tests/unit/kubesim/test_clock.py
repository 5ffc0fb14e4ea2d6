"""The controllers' time: the real `Clock` (a time scale), `FakeClock` (moved by tests) and the
`WorkQueue` delays that run on either."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.clock import Clock, FakeClock
from kubesim.workqueue import WorkQueue, process


class Monotonic:
    """A hand-moved stand-in for `time.monotonic`."""

    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


def test_the_real_clock_runs_time_scale_times_slower_than_simulated_time() -> None:
    monotonic = Monotonic()
    clock = Clock(0.01, monotonic=monotonic, wall=lambda: 1_700_000_000.0)
    assert clock.now() == 0.0
    monotonic.value += 0.5
    assert clock.now() == pytest.approx(50.0)
    assert clock.real_delay(100.0) == pytest.approx(1.0)
    assert clock.real_delay(-3.0) == 0.0
    # A simulated moment is stamped with the real time it maps to.
    assert clock.wall(50.0) == datetime.fromtimestamp(1_700_000_000.5, UTC)
    assert clock.timestamp(0.0) == "2023-11-14T22:13:20Z"


@given(
    wall0=st.floats(min_value=1e9, max_value=4e9),
    moments=st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=20),
)
def test_timestamps_are_the_wall_time_at_second_precision(
    wall0: float, moments: list[float]
) -> None:
    # Formatted once per second and reused: every moment must still show its own second.
    clock = Clock(0.5, monotonic=Monotonic(), wall=lambda: wall0)
    for at in [*moments, *sorted(moments)]:
        assert clock.timestamp(at) == clock.wall(at).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_real_clock_needs_a_positive_scale() -> None:
    with pytest.raises(ValueError, match="positive"):
        Clock(0.0)


async def test_the_real_clock_schedules_on_the_event_loop() -> None:
    fired = asyncio.Event()
    timer = Clock(0.001).call_later(1.0, fired.set)
    assert isinstance(timer, asyncio.TimerHandle)
    await asyncio.wait_for(fired.wait(), 10)


async def test_fake_time_moves_only_when_advanced() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    fired: list[float] = []
    clock.call_later(5.0, lambda: fired.append(clock.now()))
    await clock.settle()
    assert (clock.now(), fired) == (0.0, [])
    await clock.advance(4.5)
    assert (clock.now(), fired) == (4.5, [])
    await clock.advance(0.5)
    assert (clock.now(), fired) == (5.0, [5.0])
    # Timestamps are the starting wall time plus simulated seconds, one real second each.
    assert clock.timestamp() == "2023-11-14T22:13:25Z"


async def test_timers_fire_in_due_order_each_at_its_own_time() -> None:
    clock = FakeClock()
    fired: list[tuple[str, float]] = []

    def at(name: str) -> None:
        fired.append((name, clock.now()))

    clock.call_later(3.0, lambda: at("c"))
    clock.call_later(1.0, lambda: at("a"))
    cancelled = clock.call_later(2.0, lambda: at("cancelled"))

    def chain() -> None:
        clock.call_later(0.5, lambda: at("b"))

    # A timer set by another timer fires in the same advance when it falls due within it.
    clock.call_later(1.5, chain)
    cancelled.cancel()
    assert (clock.pending_timers, clock.next_due()) == (3, 1.0)
    await clock.advance(10.0)
    assert fired == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    assert (clock.now(), clock.pending_timers, clock.next_due()) == (10.0, 0, None)


async def test_time_only_moves_forward() -> None:
    with pytest.raises(ValueError, match="forward"):
        await FakeClock().advance(-1.0)


async def test_a_delayed_key_is_queued_after_its_simulated_delay() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock)
    synced: list[tuple[str, float]] = []
    worker = asyncio.create_task(process("q", queue, lambda key: synced.append((key, clock.now()))))
    try:
        queue.add_after("a", 10.0)
        queue.add_after("a", 20.0)  # the earlier timer wins
        queue.add_after("b", 30.0)
        queue.add_after("b", 40.0, replace=True)
        queue.add_after("gone", 5.0)
        queue.cancel("gone")
        await clock.advance(10.0 - 2**-10)
        assert synced == []
        await clock.advance(100.0)
        assert synced == [("a", 10.0), ("b", 40.0)]
        assert clock.pending_timers == 0
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def test_settle_returns_once_the_workers_have_drained_their_queues() -> None:
    clock = FakeClock()
    first: WorkQueue[int] = WorkQueue(clock)
    second: WorkQueue[int] = WorkQueue(clock)
    done: list[int] = []

    def hand_on(key: int) -> None:
        # Work on one queue makes work on the other, as a controller's write wakes the others.
        second.add(key * 10)

    workers = [
        asyncio.create_task(process("first", first, hand_on)),
        asyncio.create_task(process("second", second, done.append)),
    ]
    try:
        for key in range(200):
            first.add(key)
        await clock.settle()
        assert sorted(done) == [key * 10 for key in range(200)]
        assert (len(first), len(second), clock.now()) == (0, 0, 0.0)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def test_settle_says_when_nothing_works_off_a_queue() -> None:
    clock = FakeClock()
    clock.SETTLE_TURNS = 5
    queue: WorkQueue[str] = WorkQueue(clock)
    queue.add("stuck")
    with pytest.raises(RuntimeError, match="still busy"):
        await clock.settle()
