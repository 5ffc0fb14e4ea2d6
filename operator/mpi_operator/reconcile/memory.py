"""What the reconciler remembers about each MPIJob between its syncs: one `JobMemory` per job key,
made on the job's first sync that needs one, dropped in one `forget` when the job leaves the cache.

All of it only saves requests or guards against a lagging cache: a restart forgets it, and the next
syncs act from the API's state. Each field names the test that fails without it. The parse cache
(`parsed.ParsedJobs`) is not here: a process-wide, bounded cache of a pure function keyed by uid and
resourceVersion needs no forget (a version it dropped is parsed again; old entries age out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mpi_operator.cache.transforms import strip_managed_fields
from mpi_operator.kube import codec
from mpi_operator.objects import KubeObject, resource_version, uid_of
from mpi_operator.reconcile.applier import DeletedRecently
from mpi_operator.reconcile.echoes import Echo
from mpi_operator.reconcile.expectations import CreatedPods
from mpi_operator.reconcile.recreates import MadeChildren


@dataclass(frozen=True)
class StatusWrite:
    """What a status write changed, kept until the cache shows it: the metadata (less
    managedFields) and status the API returned, as JSON bytes, since a quiet job has no later sync
    to drop it and only a sync that finds the cache behind reads it."""

    before: str
    """The resourceVersion the write replaced."""
    uid: str | None
    changed: bytes

    @classmethod
    def of(cls, before: str, answer: KubeObject) -> StatusWrite:
        stripped = strip_managed_fields(answer)
        changed = {"metadata": stripped["metadata"], "status": stripped.get("status")}
        return cls(before, uid_of(answer), codec.dumps(changed))

    def over(self, cached: KubeObject) -> KubeObject | None:
        """`cached` as the write left it, while `cached` is the version it replaced (a status write
        changes nothing else); None once the cache has moved on."""
        if resource_version(cached) != self.before or uid_of(cached) != self.uid:
            return None
        return {**cached, **codec.loads(self.changed)}


@dataclass
class JobMemory:
    """One job's memory; each field's comment names the test that fails without it."""

    # Child uids deleted (no second DELETE): only reconcile/test_applier.py's no-second-DELETE test
    deleted: DeletedRecently
    # Pods created, not yet cached: reconcile/test_in_flight.py, reconcile/test_big_job.py
    created_pods: CreatedPods = field(default_factory=CreatedPods)
    # Children made, job gone: reconcile/test_deleted_midsync.py (bench/chaos.py's write storm)
    made: MadeChildren = field(default_factory=MadeChildren)
    # The last status write, while the cache lags behind it: reconcile/test_write_budget.py
    written: StatusWrite | None = None
    # (stale resourceVersion, the API's ConfigMap): elastic/test_stale_config.py
    fresher_config: tuple[str, KubeObject] | None = None
    # Since when discovered != desired (convergence histogram): elastic/test_scale.py
    diverged_since: float | None = None
    # The last status write, for `progress_pacer`: reconcile/test_write_budget.py
    status_written_at: float | None = None
    # The state the last sync left, to skip the syncs its echoes cause: reconcile/test_echoes.py
    echo: Echo | None = None


class Memories:
    """Every job's `JobMemory`, by job key."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._jobs: dict[str, JobMemory] = {}

    def of(self, key: str) -> JobMemory:
        """The memory of job `key`, made empty on first use."""
        memory = self._jobs.get(key)
        if memory is None:
            memory = self._jobs[key] = JobMemory(DeletedRecently(self._clock))
        return memory

    def get(self, key: str) -> JobMemory | None:
        return self._jobs.get(key)

    def forget(self, key: str) -> None:
        """The job left the cache: nothing of it is kept."""
        self._jobs.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)
