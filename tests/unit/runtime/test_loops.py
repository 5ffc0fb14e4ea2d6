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


class Answer:
    status = 201


class CountingApi:
    """Stands in for the HTTP client under `Metrics.instrument_api_client`: answers every request
    at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def call_api(self, resource_path: str, method: str, *_: object, **__: object) -> Answer:
        self.sent.append((method, resource_path))
        return Answer()


class Writer:
    """`ns/busy` creates a ConfigMap; `ns/idle` only reads. Both record an Event from a task of
    their own, as the EventRecorder does."""

    def __init__(self, api: CountingApi) -> None:
        self.api = api
        self.tasks: list[asyncio.Task[object]] = []

    async def reconcile(self, key: str) -> Result:
        events = "/api/v1/namespaces/ns/events"
        self.tasks.append(asyncio.create_task(self.api.call_api(events, "POST")))
        await self.api.call_api("/api/v1/namespaces/ns/configmaps/c", "GET")
        if key == "ns/busy":
            await self.api.call_api("/api/v1/namespaces/ns/configmaps", "POST")
        await asyncio.gather(*self.tasks)
        return Result()


async def test_a_reconcile_that_sent_no_write_is_counted_events_aside() -> None:
    metrics, api = Metrics(), CountingApi()
    metrics.instrument_api_client(api)
    queue: WorkQueue[str] = WorkQueue()
    reconciler = Writer(api)
    for key in ("ns/busy", "ns/idle", "ns/idle"):
        queue.add(key)
        await loops.process_next(queue, reconciler, metrics=metrics)
    sample = metrics.registry.get_sample_value
    assert sample("mpi_operator_reconcile_total", {"result": "success"}) == 3
    assert sample("mpi_operator_reconcile_without_writes_total") == 2
    assert ("POST", "/api/v1/namespaces/ns/events") in api.sent, "the Events were sent"


async def test_events_during_a_sync_cause_one_more_sync_not_one_each() -> None:
    clock, metrics = FakeClock(), Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    reconciler = SlowReconciler(clock, 1.0)
    running = loops.Workers(queue, reconciler, count=2, metrics=metrics, clock=clock)
    queue.add("ns/a")
    running.start()
    try:
        await clock.parked(sleepers=1)  # its sync runs
        for _ in range(5):
            queue.add("ns/a")
        clock.advance(1.0)
        await clock.parked(sleepers=1)  # the one more sync
        clock.advance(1.0)
        await queue.shut_down_with_drain()
        await asyncio.wait_for(running.wait(), 30)
    finally:
        await running.stop()
    assert reconciler.done == ["ns/a", "ns/a"]
