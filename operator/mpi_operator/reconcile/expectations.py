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
class CreatedPods:
    """One job's pods created by this operator that its store has not shown yet (by pod name: when
    created, and the pod as the store would keep it), for the job's `uid`."""

    uid: str | None = None
    pods: dict[str, tuple[float, KubeObject]] = field(default_factory=dict)

    def add(self, uid: str | None, pod: KubeObject, now: float) -> None:
        if uid != self.uid:
            self.uid, self.pods = uid, {}
        self.pods[name_of(pod)] = (now, transforms.pod(pod))

    def pending(
        self, uid: str | None, cached: Callable[[str], bool], now: float, ttl: float = TTL
    ) -> list[KubeObject]:
        """The pods still in flight for the job with `uid`; `cached(name)` says whether the store
        has a pod of that name. What the store has caught up with, or what expired, is dropped."""
        if uid != self.uid:
            self.pods = {}
            return []
        self.pods = {
            name: (at, pod)
            for name, (at, pod) in self.pods.items()
            if now - at < ttl and not cached(name)
        }
        return [pod for _, pod in self.pods.values()]

    def discard(self, name: str) -> None:
        """Pod `name` is being deleted by this operator: no longer a create in flight."""
        self.pods.pop(name, None)

    def expires_in(self, now: float, ttl: float = TTL) -> float | None:
        """Seconds until the oldest expectation expires; None if there is none."""
        if not self.pods:
            return None
        oldest = min(at for at, _ in self.pods.values())
        return max(0.0, oldest + ttl - now)

    def __len__(self) -> int:
        return len(self.pods)
