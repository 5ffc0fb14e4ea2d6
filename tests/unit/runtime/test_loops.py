"""Workers time each reconcile on the clock they are given (the duration metric), not on the
machine's."""

from __future__ import annotations

import asyncio

from mpi_operator.cache.workqueue import WorkQueue
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.runtime import loops
from mpi_operator.runtime.metrics import Metrics
from mpi_operator.runtime.types import Result

DURATION_SUM = "mpi_operator_reconcile_duration_seconds_sum"


class SlowReconciler:
    """Takes `seconds` of the clock's time per reconcile."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self.done: list[str] = []

    async def reconcile(self, key: str) -> Result:
        await self.clock.sleep(self.seconds)
        self.done.append(key)
        return Result()


async def test_process_next_observes_the_reconcile_duration_on_the_given_clock() -> None:
    clock, metrics = FakeClock(), Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("ns/a")
    await clock.run_until(
        loops.process_next(queue, SlowReconciler(clock, 2.5), metrics=metrics, clock=clock)
    )
    assert metrics.registry.get_sample_value(DURATION_SUM) == 2.5


async def test_workers_pass_their_clock_to_every_worker() -> None:
    clock, metrics = FakeClock(), Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    reconciler = SlowReconciler(clock, 4.0)
    running = loops.Workers(queue, reconciler, count=2, metrics=metrics, clock=clock)
    for key in ("ns/a", "ns/b"):
        queue.add(key)
    running.start()
    try:
        await clock.parked(sleepers=2)  # both keys in flight at once, one per worker
        clock.advance(4.0)
        await queue.shut_down_with_drain()
        await asyncio.wait_for(running.wait(), 30)
    finally:
        await running.stop()
    assert sorted(reconciler.done) == ["ns/a", "ns/b"]
    assert metrics.registry.get_sample_value(DURATION_SUM) == 8.0


class RequeueOnce:
    """Asks for `Result(requeue=True)` the first time it sees `key`."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.done: list[str] = []

    async def reconcile(self, key: str) -> Result:
        self.done.append(key)
        return Result(requeue=key == self.key and self.done.count(key) == 1)


async def test_a_requeue_goes_behind_every_key_already_queued() -> None:
    clock, metrics = FakeClock(), Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key in ("ns/big", "ns/a", "ns/b"):
        queue.add(key)
    reconciler = RequeueOnce("ns/big")
    for _ in range(4):
        await loops.process_next(queue, reconciler, metrics=metrics, clock=clock)
    assert reconciler.done == ["ns/big", "ns/a", "ns/b", "ns/big"]
    assert len(queue) == 0
    assert queue.waiting == 0, "a requeue is not a delayed add"
