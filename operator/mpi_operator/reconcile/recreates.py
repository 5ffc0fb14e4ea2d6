"""A child the operator created that is gone again: re-created only once the API confirms its job.

The garbage collector removes a deleted job's Service, ConfigMap, Secret, launcher Job and PodGroup;
while the MPIJob watch is failing the cache still holds the job, and each collector deletion syncs
it again: re-create, collect, re-create, a write every few milliseconds for a job that is gone. So a
sync that would re-create a child this process created for the same job uid first GETs the job. Gone
(404), replaced (another uid) or being deleted: nothing is written and the uid is remembered as gone
until the cache drops the job. A GET that fails otherwise does not block the repair. Worker pods are
left out: they are re-created after every failure, and the applier stops a sync once the cache sees
the job deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mpi_operator.objects import KubeObject
from mpi_operator.planning import ObjectRef

_SKIPPED_KINDS = frozenset({"Pod"})


@dataclass
class _Made:
    uid: str
    refs: set[tuple[str, str]] = field(default_factory=set)


class MadeChildren:
    """Per job key, which of its (non-pod) children this process created for the job's current uid."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Made] = {}
        self._gone: set[str] = set()

    def add(self, key: str, uid: str, child: KubeObject) -> None:
        kind = str(child.get("kind") or "")
        if kind in _SKIPPED_KINDS:
            return
        made = self._jobs.get(key)
        if made is None or made.uid != uid:
            if made is not None:
                self._gone.discard(made.uid)
            made = self._jobs[key] = _Made(uid)
        made.refs.add((kind, str((child.get("metadata") or {}).get("name") or "")))

    def recreates(self, key: str, uid: str, creates: Iterable[ObjectRef]) -> bool:
        """Whether any of `creates` is a child created before for this job uid (so it went away)."""
        made = self._jobs.get(key)
        if made is None or made.uid != uid:
            return False
        return any((ref.kind, ref.name) in made.refs for ref in creates)

    def mark_gone(self, uid: str) -> None:
        self._gone.add(uid)

    def is_gone(self, uid: str) -> bool:
        """The API said this job uid is gone: its syncs write nothing until the cache drops it."""
        return uid in self._gone

    def forget(self, key: str) -> None:
        """The cache dropped the job: nothing more is kept of it (its uid is never synced again)."""
        made = self._jobs.pop(key, None)
        if made is not None:
            self._gone.discard(made.uid)
