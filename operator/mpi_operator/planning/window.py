"""Which missing workers one sync builds and creates: at most a window of them, lowest indices
first.

A job at the worker ceiling would otherwise build, plan, check and create a thousand pods in one
sync, holding a reconcile worker (and, for the CPU-bound steps, the event loop) while every other
job waits. With a window, a sync of a big job creates `WORKER_WINDOW` workers, writes the job's
status and goes to the back of the queue (`Plan.deferred_workers`), so other jobs are served between
its windows; a job that fits in one window is planned exactly as before. The launcher Job waits
until every worker has been created (`planner`), as upstream creates it after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, naming
from mpi_operator.objects import name_of
from mpi_operator.planning.observed import Observed

WORKER_WINDOW: Final = 32
"""The most worker pods one sync creates: the applier's largest slow-start batch. A window takes six
round trips (batches of 1, 2, 4, 8, 16, then the last one), and a job waiting for a reconcile worker
behind a big job waits for one window (tests/integration/reconcile/test_fair.py measures it)."""


@dataclass(frozen=True)
class WorkerWindow:
    indices: tuple[int, ...]
    """The missing workers this sync builds and creates, in index order."""
    deferred: int
    """Missing workers beyond the window: a later sync's."""


def worker_window(job: MPIJob, observed: Observed, size: int = WORKER_WINDOW) -> WorkerWindow:
    """The first `size` worker indices with no pod under their name in `observed`, and how many more
    are missing. `size` must be positive."""
    if size < 1:
        raise ValueError(f"the worker window must be positive, got {size}")
    present = {name_of(pod) for pod in observed.worker_pods}
    missing = [
        index
        for index in range(config.worker_replicas(job))
        if naming.worker_name(job, index) not in present
    ]
    return WorkerWindow(indices=tuple(missing[:size]), deferred=max(len(missing) - size, 0))
