"""The contract between the runtime and the reconciler: `Reconciler`, `Result`, `PermanentError`,
and what the manager hands a reconciler factory (`ManagerDeps`, `Stores`).

The runtime (manager, loops) only knows this protocol; the reconciler (`reconcile.reconciler`)
plugs in through a `ReconcilerFactory`, so runtime tests can plug in their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from mpi_operator.cache.store import Store
from mpi_operator.flowcontrol import Clock
from mpi_operator.kube.client import Kube
from mpi_operator.kube.events import EventRecorder
from mpi_operator.runtime.metrics import Metrics
from mpi_operator.settings import Settings


@dataclass(frozen=True)
class Result:
    """What a successful reconcile asks for: nothing, another look after `requeue_after` seconds
    (e.g. an activeDeadlineSeconds or TTL timer), or, with `requeue`, another look at once but
    behind every key already queued (a big job between its windows of creates). Errors are raised,
    not returned."""

    requeue_after: float | None = None
    requeue: bool = False


class FatalError(Exception):
    """The process cannot go on (missing CRD, no permission, lost leadership): `run` exits 1 with
    this message; the Deployment restarts the pod."""


class PermanentError(Exception):
    """Retrying cannot help (invalid spec, foreign object in the way): report it, do not requeue.

    The job is reconciled again on its next watch event (e.g. when the user fixes the spec)."""


class Reconciler(Protocol):
    async def reconcile(self, key: str) -> Result:
        """Converges the MPIJob `key` ("namespace/name"); idempotent and level-triggered.

        Raises to be retried with per-key backoff, `PermanentError` to be dropped until the next
        event."""
        ...


@dataclass(frozen=True)
class Stores:
    """The informers' read-only caches (see `cache.store`: never mutate what they return).

    Each child store holds only what the manager's label selectors let through and is indexed by
    controller-owner uid: `pods.controlled_by(job_uid)` are a job's worker pods,
    `pods.controlled_by(launcher_job_uid)` its launcher pods."""

    mpijobs: Store
    pods: Store
    jobs: Store
    services: Store
    config_maps: Store
    secrets: Store
    pod_groups: Store | None = None
    """Only with `--gang-scheduling` (volcano or scheduler-plugins PodGroups)."""
    priority_classes: Store | None = None
    """Only with `--gang-scheduling`: cluster-scoped PriorityClasses by name (PodGroup priority)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ManagerDeps:
    """Everything a reconciler may use; built once by the manager and passed to the factory."""

    kube: Kube
    stores: Stores
    recorder: EventRecorder
    settings: Settings
    clock: Clock
    """Monotonic time and timers (a `FakeClock` in tests)."""
    metrics: Metrics
    """Hooks: `job_created()`, `job_succeeded()`, `job_failed()`, `set_job_info(...)`."""
    now: Callable[[], datetime] = field(default=utc_now)
    """Wall-clock time for status timestamps (injectable for tests)."""


ReconcilerFactory = Callable[[ManagerDeps], Reconciler]
