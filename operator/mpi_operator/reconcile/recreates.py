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
class MadeChildren:
    """One job's (non-pod) children this process created for the job's current `uid`, as (kind,
    name), and whether the API said that uid is gone."""

    uid: str | None = None
    refs: set[tuple[str, str]] = field(default_factory=set)
    gone: bool = False

    def add(self, uid: str, child: KubeObject) -> None:
        kind = str(child.get("kind") or "")
        if kind in _SKIPPED_KINDS:
            return
        if uid != self.uid:
            self.uid, self.refs, self.gone = uid, set(), False
        self.refs.add((kind, str((child.get("metadata") or {}).get("name") or "")))

    def recreates(self, uid: str, creates: Iterable[ObjectRef]) -> bool:
        """Whether any of `creates` is a child created before for this job uid (so it went away)."""
        return uid == self.uid and any((ref.kind, ref.name) in self.refs for ref in creates)

    def mark_gone(self, uid: str) -> None:
        if uid == self.uid:
            self.gone = True

    def is_gone(self, uid: str) -> bool:
        """The API said this job uid is gone: its syncs write nothing until the cache drops it."""
        return self.gone and uid == self.uid
