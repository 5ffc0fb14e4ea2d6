"""Worker pods created but not yet seen by the pod cache: client-go's `ControllerExpectations`,
keeping the created objects rather than a count, each slimmed as the pod store slims it.

A big job is synced window by window, each window's sync requeued at once, possibly before the pod
watch delivered the last window's pods: without expectations they would be planned again (a 409 and
a GET per pod, or a status that goes back and forth). `observe` counts the pending ones as observed.
An expectation ends when the store shows a pod of that name, when this operator deletes that pod,
when its job goes away or is replaced (new uid), or after `TTL` seconds in case the watch never
delivers it (the next sync plans from the store alone, at worst meeting a 409 the applier resolves);
a sync that still counts on one asks to be synced again when it expires (`expires_in`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mpi_operator.cache import transforms
from mpi_operator.objects import KubeObject, name_of

TTL: Final = 30.0
"""Seconds an unseen create is trusted (client-go: 5 minutes; a watch lags seconds, not minutes)."""


@dataclass
class _Job:
    uid: str | None
    pods: dict[str, tuple[float, KubeObject]] = field(default_factory=dict)


class CreatedPods:
    """Per job key, the pods created by this operator that its store has not shown yet."""

    def __init__(self, clock: Callable[[], float], ttl: float = TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._jobs: dict[str, _Job] = {}

    def add(self, key: str, uid: str | None, pod: KubeObject) -> None:
        job = self._jobs.get(key)
        if job is None or job.uid != uid:
            job = self._jobs[key] = _Job(uid)
        job.pods[name_of(pod)] = (self._clock(), transforms.pod(pod))

    def pending(self, key: str, uid: str | None, cached: Callable[[str], bool]) -> list[KubeObject]:
        """The pods of job `key` (with `uid`) still in flight; `cached(name)` says whether the store
        has a pod of that name. What the store has caught up with, or what expired, is dropped."""
        job = self._jobs.get(key)
        if job is None:
            return []
        if job.uid != uid:
            del self._jobs[key]
            return []
        now = self._clock()
        job.pods = {
            name: (at, pod)
            for name, (at, pod) in job.pods.items()
            if now - at < self._ttl and not cached(name)
        }
        if not job.pods:
            del self._jobs[key]
            return []
        return [pod for _, pod in job.pods.values()]

    def discard(self, key: str, name: str) -> None:
        """Pod `name` of job `key` is being deleted by this operator: no longer a create in flight."""
        job = self._jobs.get(key)
        if job is not None:
            job.pods.pop(name, None)

    def expires_in(self, key: str) -> float | None:
        """Seconds until the oldest expectation of job `key` expires; None if it has none."""
        job = self._jobs.get(key)
        if job is None or not job.pods:
            return None
        oldest = min(at for at, _ in job.pods.values())
        return max(0.0, oldest + self._ttl - self._clock())

    def forget(self, key: str) -> None:
        self._jobs.pop(key, None)

    def __len__(self) -> int:
        return sum(len(job.pods) for job in self._jobs.values())
