"""N reconcile loops over the work queue (client-go's `processNextWorkItem`, controller-runtime's
`reconcileHandler`). Named loops, not workers: `desired/workers.py` builds worker pods.

Each loop: `get` a key -> `reconcile(key)` inside `key_context(key)` ->
  * `Result()` -> `forget`; `Result(requeue_after=s)` -> `forget`, `add_after(key, s)`;
  * `Result(requeue=True)` -> `forget`, `add(key)`: `done` queues it behind every waiting key;
  * `PermanentError` -> `forget`, logged, not requeued (the next watch event brings it back);
  * any other exception -> `add_rate_limited` (per-key exponential backoff + global bucket);
and always `done(key)`, so no key is held by two loops and one that changed meanwhile runs again.
Loops exit when the queue raises `ShutDown`; each reconcile's writes are counted (syncs that wrote
nothing are a metric of their own).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from mpi_operator.cache.workqueue import ShutDown
from mpi_operator.flowcontrol import Clock, MonotonicClock
from mpi_operator.kube import errors
from mpi_operator.runtime import logging as oplog
from mpi_operator.runtime.metrics import Metrics, ReconcileOutcome
from mpi_operator.runtime.types import PermanentError, Reconciler

log = logging.getLogger(__name__)


class Queue(Protocol):
    """The part of `cache.workqueue.WorkQueue[str]` a worker uses."""

    async def get(self) -> str: ...

    def done(self, key: str) -> None: ...

    def forget(self, key: str) -> None: ...

    def add(self, key: str) -> None: ...

    def add_after(self, key: str, delay: float) -> None: ...

    def add_rate_limited(self, key: str) -> None: ...

    def num_requeues(self, key: str) -> int: ...


async def process_next(
    queue: Queue, reconciler: Reconciler, *, metrics: Metrics, clock: Clock | None = None
) -> None:
    """Takes one key and reconciles it; raises `ShutDown` when the queue is shut down and empty.

    `clock` times the reconcile for the duration metric (None: the real monotonic clock)."""
    key = await queue.get()
    try:
        with oplog.key_context(key):
            await _reconcile(queue, reconciler, key, metrics, clock or MonotonicClock())
    finally:
        queue.done(key)


async def _reconcile(
    queue: Queue, reconciler: Reconciler, key: str, metrics: Metrics, clock: Clock
) -> None:
    started = clock.now()
    outcome: ReconcileOutcome = "error"
    writes = None
    try:
        with metrics.counting_writes() as writes:
            result = await reconciler.reconcile(key)
    except PermanentError as exc:
        outcome = "permanent_error"
        log.error("reconcile failed permanently, not retrying: %s", exc)
        queue.forget(key)
    except Exception as exc:
        # Cancellation (BaseException) passes through: shutdown or lost leadership, not a failure.
        retries = queue.num_requeues(key)
        if isinstance(exc, errors.KubeError):
            log.warning("reconcile failed (retry %d): %s", retries + 1, exc)
        else:
            log.exception("reconcile failed (retry %d)", retries + 1)
        queue.add_rate_limited(key)
        metrics.queue_retry()
    else:
        queue.forget(key)
        if result.requeue_after is not None:
            outcome = "requeue_after"
            queue.add_after(key, max(result.requeue_after, 0.0))
        elif result.requeue:
            outcome = "requeue_after"
            queue.add(key)
        else:
            outcome = "success"
    finally:
        metrics.observe_reconcile(
            clock.now() - started, outcome, writes=writes.count if writes is not None else None
        )


async def worker(
    queue: Queue, reconciler: Reconciler, *, metrics: Metrics, clock: Clock | None = None
) -> None:
    """Reconciles keys until the queue is shut down and drained of queued keys."""
    clock = clock or MonotonicClock()
    while True:
        try:
            await process_next(queue, reconciler, metrics=metrics, clock=clock)
        except ShutDown:
            return


class Workers:
    """`count` worker tasks; `stop()` cancels whatever is still running (after the queue
    drained)."""

    def __init__(
        self,
        queue: Queue,
        reconciler: Reconciler,
        *,
        count: int,
        metrics: Metrics,
        clock: Clock | None = None,  # None for the real clock
    ) -> None:
        if count < 1:
            raise ValueError(f"need at least one worker, got {count}")
        self.queue = queue
        self.reconciler = reconciler
        self.count = count
        self.metrics = metrics
        self.clock: Clock = clock or MonotonicClock()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(
                worker(self.queue, self.reconciler, metrics=self.metrics, clock=self.clock),
                name=f"worker-{i}",
            )
            for i in range(self.count)
        ]

    async def wait(self) -> None:
        """Until every worker returned (the queue was shut down); re-raises a worker's crash."""
        if self.tasks:
            await asyncio.gather(*self.tasks)

    async def stop(self) -> None:
        """Cancels the workers and waits for them to finish unwinding."""
        for task in self.tasks:
            task.cancel()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.error("worker ended with an error: %r", result)
