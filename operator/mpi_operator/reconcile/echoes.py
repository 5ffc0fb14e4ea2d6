"""The state a sync leaves, as the stores will show it once its own writes come back (`Echo`), so
that the syncs those echoes cause are recognised and skipped (docs/architecture.md, "Observe").

Objects compare by resourceVersion, which moves on every write, so another writer's change makes
the next sync a full one; pods whose version moved compare by what a sync reads of them
(`runtime.handlers.pod_update_matters`), so a pod the scheduler bound is still an echo. A sync
whose outcome depends on time asks for another look (`Result.requeue_after`): its echo lasts until
then. Only static jobs leave one: an elastic job's host change goes in steps, each planned from the
cache showing the write of the step before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mpi_operator.cache import transforms
from mpi_operator.objects import KubeObject, name_of, resource_version
from mpi_operator.planning import ObjectRef, Observed
from mpi_operator.runtime.handlers import pod_update_matters

JOB: tuple[str, str] = ("MPIJob", "")
State = dict[tuple[str, str], Mapping[str, Any]]
"""(kind, name) -> the job and every child a sync reads, as it read them."""


def _children(observed: Observed) -> Iterable[tuple[str, KubeObject | None]]:
    yield "Service", observed.service
    yield "ConfigMap", observed.config_map
    yield "Secret", observed.secret
    yield "Job", observed.launcher_job
    yield "PodGroup", observed.pod_group
    yield "PodDisruptionBudget", observed.pdb
    for pod in (*observed.launcher_pods, *observed.worker_pods):
        yield "Pod", pod


def state_of(job: Mapping[str, Any], observed: Observed) -> State:
    """The state a sync reads: the MPIJob and its children."""
    state: State = {JOB: job}
    for kind, obj in _children(observed):
        if obj is not None:
            state[(kind, name_of(obj))] = obj
    return state


def _same(key: tuple[str, str], left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    if resource_version(left) == resource_version(right):
        return True
    return key[0] == "Pod" and not pod_update_matters(left, right)


def _kept(key: tuple[str, str], obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What `_same` compares later: a pod whole, anything else by its resourceVersion alone, so that
    an echo kept until the job's next sync does not hold on to the API's answers (the MPIJob's
    status write, a created Job) for as long as the job stays quiet."""
    if key[0] == "Pod":
        return obj
    return {"metadata": {"resourceVersion": resource_version(obj)}}


@dataclass(frozen=True)
class Echo:
    """The state one sync left, and until when a sync that finds it may be skipped (None: until
    something changes)."""

    state: State
    until: float | None = None

    @classmethod
    def after(
        cls,
        job: Mapping[str, Any],
        observed: Observed,
        written: Mapping[ObjectRef, KubeObject],
        until: float | None = None,
    ) -> Echo:
        """The state a sync read (`observed`) once its writes are back: each written child as the
        API returned it (a pod as the pod store keeps it), the job as `job` (its status write's
        answer, or the one read)."""
        state = {key: _kept(key, obj) for key, obj in state_of(job, observed).items()}
        for ref, obj in written.items():
            key = (ref.kind, ref.name)
            state[key] = _kept(key, transforms.pod(obj) if ref.kind == "Pod" else obj)
        return cls(state, until)

    def heard(self, state: State, now: float) -> bool:
        """Whether a sync that reads `state` at `now` would only hear this echo."""
        if self.until is not None and now >= self.until:
            return False
        if state.keys() != self.state.keys():
            return False
        return all(_same(key, obj, state[key]) for key, obj in self.state.items())
