"""WorkQueue: dedup, stingy processing, delayed and rate-limited adds, shutdown and drain."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubesim.testing import eventually
from mpi_operator.cache.ratelimit import ItemExponentialFailureRateLimiter
from mpi_operator.cache.workqueue import ShutDown, WorkQueue
from mpi_operator.flowcontrol import FakeClock


def take_now(queue: WorkQueue[str]) -> str:
    """`get()` without an event loop: it must complete without suspending when a key is queued."""
    coro: Coroutine[Any, Any, str] = queue.get()
    try:
        coro.send(None)
    except StopIteration as stop:
        return str(stop.value)
    coro.close()
    raise AssertionError("get() suspended although a key was queued")


def make_queue(clock: FakeClock | None = None) -> WorkQueue[str]:
    clock = clock or FakeClock()
    return WorkQueue(rate_limiter=ItemExponentialFailureRateLimiter(0.005, 1000.0), clock=clock)


def test_adds_of_a_queued_key_collapse_into_one_and_order_is_fifo() -> None:
    queue = make_queue()
    for key in ["a", "b", "a", "c", "b", "a"]:
        queue.add(key)
    assert len(queue) == 3
    assert [take_now(queue) for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0


def test_an_urgent_key_jumps_the_queue_once_and_keeps_dedup() -> None:
    queue = make_queue()
    for key in ["a", "b", "c"]:
        queue.add(key)
    queue.add("c", urgent=True)  # already queued: moved to the front, not duplicated
    queue.add("d", urgent=True)
    queue.add("d")
    assert len(queue) == 4
    assert [take_now(queue) for _ in range(4)] == ["d", "c", "a", "b"]


def test_an_urgent_add_while_processing_comes_back_first_after_done() -> None:
    queue = make_queue()
    queue.add("a")
    assert take_now(queue) == "a"
    queue.add("b")
    queue.add("a", urgent=True)
    assert len(queue) == 1, "still never queued twice while processing"
    queue.done("a")
    assert [take_now(queue), take_now(queue)] == ["a", "b"]


def test_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    queue = make_queue()
    queue.add("a")
    assert take_now(queue) == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "a key being processed must not be queued for a second worker"
    queue.done("a")
    assert len(queue) == 1
    assert take_now(queue) == "a"
    queue.done("a")
    assert len(queue) == 0
    assert queue.processing == frozenset()


async def test_waiting_workers_are_woken_in_order_and_each_key_goes_to_one_worker() -> None:
    queue = make_queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    # One loop iteration each, not a wait for time: new tasks run (and park in get()) in creation
    # order on the next iteration, and woken ones on the one after.
    await asyncio.sleep(0)
    queue.add("a")
    queue.add("b")
    await asyncio.sleep(0)
    assert [g.done() for g in getters] == [True, True, False]
    assert {getters[0].result(), getters[1].result()} == {"a", "b"}
    queue.shut_down()
    with pytest.raises(ShutDown):
        await getters[2]


async def test_a_cancelled_waiter_passes_its_wake_up_on() -> None:
    queue = make_queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)  # one loop iteration: both park in get(), in order
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 30) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_concurrent_workers_never_process_one_key_twice_at_once() -> None:
    queue = make_queue()
    active: set[str] = set()
    processed: list[str] = []

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                assert key not in active, f"{key} handed to two workers"
                active.add(key)
                await asyncio.sleep(0)  # yields mid-processing, so that other workers interleave
                if len(processed) % 3 == 0:
                    queue.add(key)  # re-added mid-processing
                await asyncio.sleep(0)
                processed.append(key)
            finally:
                active.discard(key)
                queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(200):
        queue.add(f"k{i % 7}")
        if i % 5 == 0:
            await asyncio.sleep(0)  # lets the workers interleave with the adds
    await asyncio.wait_for(queue.shut_down_with_drain(), 30)
    await asyncio.wait_for(asyncio.gather(*workers), 30)
    assert set(processed) == {f"k{i}" for i in range(7)}


@pytest.mark.parametrize(
    ("delays", "steps", "expected_ready_after_step"),
    [
        ([1.0], [0.5, 0.5], [0, 1]),
        ([5.0, 1.0], [1.0, 4.0], [1, 1]),
        ([1.0, 5.0], [1.0, 4.0], [1, 1]),
        ([0.0], [0.0], [1]),
        ([-1.0], [0.0], [1]),
    ],
    ids=[
        "fires-at-deadline",
        "earlier-deadline-wins",
        "later-deadline-ignored",
        "zero-is-add",
        "negative-is-add",
    ],
)
def test_add_after_keeps_the_earliest_deadline_per_key(
    delays: list[float], steps: list[float], expected_ready_after_step: list[int]
) -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    for delay in delays:
        queue.add_after("a", delay)
    ready = []
    for step in steps:
        clock.advance(step)
        ready.append(len(queue))
    assert ready == expected_ready_after_step
    assert queue.waiting == 0
    assert clock.pending_timers == 0


def test_add_rate_limited_backs_off_exponentially_until_forgotten() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    delays = []
    for _ in range(4):
        queue.add_rate_limited("a")
        start = clock.now()
        while not len(queue):
            clock.advance(0.001)
        delays.append(round(clock.now() - start, 3))
        assert take_now(queue) == "a"
        queue.done("a")
    assert delays == [0.005, 0.01, 0.02, 0.04]
    assert queue.num_requeues("a") == 4
    queue.forget("a")
    assert queue.num_requeues("a") == 0


async def test_shut_down_hands_out_what_is_queued_then_raises_and_ignores_new_adds() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    queue.add("a")
    queue.add_after("later", 10)
    queue.shut_down()
    queue.add("b")
    clock.advance(20)
    assert queue.shutting_down
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shut_down_with_drain_waits_for_in_flight_keys() -> None:
    queue = make_queue()
    queue.add("a")
    key = await queue.get()
    drain = asyncio.create_task(queue.shut_down_with_drain())
    # Shutting down is its first step; had it not waited for the key in flight, it would be done
    # then.
    await eventually(lambda: queue.shutting_down)
    assert not drain.done(), "drain returned while a key was still being processed"
    queue.done(key)
    await asyncio.wait_for(drain, 30)


async def test_real_clock_add_after_fires() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.01)
    assert await asyncio.wait_for(queue.get(), 30) == "a"
    queue.done("a")
    queue.shut_down()


class QueueModel(RuleBasedStateMachine):
    """The queue against a model: stingy, deduplicating, and every add is eventually processed."""

    def __init__(self) -> None:
        super().__init__()
        self.queue = make_queue()
        self.processing: list[str] = []
        self.owed: set[str] = set()
        """Keys added since they were last handed out: each must be handed out again."""
        self.order: list[str] = []
        """The order the keys not in flight must come out in: FIFO, urgent ones in front."""
        self.urgent_later: set[str] = set()
        """Keys added urgently while in flight: they go to the front when done."""

    @rule(key=st.sampled_from("abcd"), urgent=st.booleans())
    def add(self, key: str, urgent: bool) -> None:
        self.queue.add(key, urgent=urgent)
        if key in self.processing:
            if urgent:
                self.urgent_later.add(key)
        elif key not in self.order:
            self.order.insert(0, key) if urgent else self.order.append(key)
        elif urgent:
            self.order.remove(key)
            self.order.insert(0, key)
        self.owed.add(key)

    @precondition(lambda self: len(self.queue) > 0)
    @rule()
    def get(self) -> None:
        key = take_now(self.queue)
        assert key not in self.processing, "handed out while already processing"
        assert key == self.order.pop(0), "out of order"
        self.processing.append(key)
        self.owed.discard(key)

    @precondition(lambda self: bool(self.processing))
    @rule(index=st.integers(min_value=0, max_value=3))
    def done(self, index: int) -> None:
        key = self.processing.pop(index % len(self.processing))
        self.queue.done(key)
        if key in self.owed:
            self.order.insert(0, key) if key in self.urgent_later else self.order.append(key)
        self.urgent_later.discard(key)

    @invariant()
    def queued_keys_are_exactly_the_owed_ones_not_in_flight(self) -> None:
        assert len(self.queue) == len(self.owed - set(self.processing))

    def teardown(self) -> None:
        for key in list(self.processing):
            self.queue.done(key)
        seen = set()
        while len(self.queue):
            key = take_now(self.queue)
            seen.add(key)
            self.queue.done(key)
        assert self.owed <= seen


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
