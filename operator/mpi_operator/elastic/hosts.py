"""Which workers may be discovered: the observed worker pods read once into `WorkerPod`s.

A worker may be listed by `discover_hosts.sh` only when Horovod can use it now and the operator
wants it: Ready (the kubelet's word that sshd answers), not terminating, not finished, not draining,
its index below the desired replica count, and it is the *current* incarnation of its index (an
older one is a pod being replaced). The list is in natural index order (`worker-2` before
`worker-10`), each host in one spelling only: Horovod takes every distinct string for a distinct
host. Pure: observed JSON in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from mpi_operator.api.defaults import launcher_slots, slots_per_worker
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config
from mpi_operator.desired.naming import is_controlled_by, launcher_fqdn
from mpi_operator.elastic import losses
from mpi_operator.elastic.identity import pod_incarnation, worker_host
from mpi_operator.elastic.state import Member
from mpi_operator.objects import (
    POD_FAILED,
    POD_PENDING,
    POD_RUNNING,
    POD_SUCCEEDED,
    is_pod_ready,
    is_terminating,
    name_of,
    parse_time,
    pod_phase,
    pod_ready_since,
    pod_status_field,
    status_field,
    uid_of,
)

DRAINING_ANNOTATION: Final = "mpi-operator.kubeflow.org/draining-since"
"""On a worker pod being scaled in: when it left discovery (RFC 3339); its grace period counts from
it."""


@dataclass(frozen=True)
class WorkerPod:
    """What the elastic layer needs to know about one observed worker pod."""

    index: int
    name: str
    uid: str | None
    incarnation: int
    ready: bool
    terminating: bool
    finished: bool
    restarted: bool
    draining_since: float | None
    failure_reason: str
    exit_code: int | None
    disruption: str | None = None
    """Why the cluster took the pod (`losses.disruption_reason`); None: not taken by the cluster."""
    deletion_deadline: float | None = None
    """`metadata.deletionTimestamp`: when its kubelet should have finished deleting it."""
    placed: bool = False
    """A kubelet has taken it (Running, or Pending with container statuses): it is starting, not
    waiting for room."""
    ready_since: float | None = None
    """When it last became Ready (its condition's lastTransitionTime); None when not Ready."""

    @property
    def member(self) -> Member:
        return (self.index, self.incarnation)

    @property
    def usable(self) -> bool:
        """Horovod can run on it now (whether or not the operator wants it)."""
        return self.ready and not self.terminating and not self.finished and not self.restarted

    @property
    def starting(self) -> bool:
        """Placed and on its way to Ready: a worker pacing may wait a moment for."""
        return self.placed and not self.ready and not self.terminating and not self.failed

    @property
    def loss(self) -> str | None:
        """Once its life is over, why: the disruption, or `Deleted` for a pod deleted without
        one; None for a program failure (or a pod still alive)."""
        if self.disruption is not None:
            return self.disruption
        return losses.DELETED if self.terminating and not self.failed else None

    @property
    def failed(self) -> bool:
        """Its current life is over without the operator asking: failed, evicted, exited,
        restarted."""
        return self.finished or self.restarted


def _terminated_state(pod: Mapping[str, Any]) -> tuple[str, int | None, bool]:
    """`(reason, exit code, restarted)` from the first container that terminated or restarted."""
    status = pod.get("status")
    statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
    restarted = False
    for cs in statuses if isinstance(statuses, list) else []:
        if not isinstance(cs, Mapping):
            continue
        count = cs.get("restartCount")
        if isinstance(count, int) and count > 0:
            restarted = True
        for key in ("state", "lastState"):
            state = cs.get(key)
            terminated = state.get("terminated") if isinstance(state, Mapping) else None
            if isinstance(terminated, Mapping):
                code = terminated.get("exitCode")
                reason = terminated.get("reason")
                exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
                return (str(reason) if reason else "Terminated"), exit_code, restarted
    return "", None, restarted


def _placed(pod: Mapping[str, Any], phase: str) -> bool:
    """Running, or Pending with container statuses (its kubelet is creating the containers)."""
    statuses = status_field(pod, "containerStatuses")
    return phase == POD_RUNNING or (
        phase == POD_PENDING and isinstance(statuses, list) and bool(statuses)
    )


def read_worker(job: MPIJob, pod: Mapping[str, Any]) -> WorkerPod | None:
    """The `WorkerPod` of one of the job's own worker pods; None for any other pod."""
    index = config.observed_worker_index(job, pod)
    if index is None or (job.uid and not is_controlled_by(pod, job)):
        return None
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    since_text = annotations.get(DRAINING_ANNOTATION) if isinstance(annotations, Mapping) else None
    since = parse_time(since_text)
    deadline = parse_time(
        metadata.get("deletionTimestamp") if isinstance(metadata, Mapping) else None
    )
    phase = pod_phase(pod)
    reason, exit_code, restarted = _terminated_state(pod)
    pod_reason = pod_status_field(pod, "reason")
    if phase == POD_FAILED and pod_reason:
        reason = pod_reason  # Evicted, DeadlineExceeded, NodeLost... say more than the container
    elif not reason:
        reason = {POD_FAILED: "Failed", POD_SUCCEEDED: "Completed"}.get(phase, "")
    if restarted and phase not in (POD_FAILED, POD_SUCCEEDED):
        reason = f"ContainerRestarted ({reason})" if reason else "ContainerRestarted"
    ready = is_pod_ready(pod)
    ready_at = pod_ready_since(pod) if ready else None
    return WorkerPod(
        index=index,
        name=name_of(pod),
        uid=uid_of(pod),
        incarnation=pod_incarnation(job, index, pod),
        ready=ready,
        terminating=is_terminating(pod),
        finished=phase in (POD_FAILED, POD_SUCCEEDED),
        restarted=restarted,
        draining_since=since.timestamp() if isinstance(since, datetime) else None,
        failure_reason=reason,
        exit_code=exit_code,
        disruption=losses.disruption_reason(pod),
        deletion_deadline=deadline.timestamp() if isinstance(deadline, datetime) else None,
        placed=_placed(pod, phase),
        ready_since=ready_at.timestamp() if ready_at is not None else None,
    )


def read_workers(job: MPIJob, pods: Iterable[Mapping[str, Any]]) -> dict[int, WorkerPod]:
    """The job's worker pods by index."""
    out: dict[int, WorkerPod] = {}
    for pod in pods:
        worker = read_worker(job, pod)
        if worker is not None:
            out[worker.index] = worker
    return out


def is_current(worker: WorkerPod, incarnations: Mapping[int, int]) -> bool:
    return worker.incarnation == incarnations.get(worker.index, 0)


def alive_members(workers: Mapping[int, WorkerPod], incarnations: Mapping[int, int]) -> set[Member]:
    """Identities that may stay listed: usable pods of their index's current incarnation."""
    return {w.member for w in workers.values() if w.usable and is_current(w, incarnations)}


def wanted_members(
    workers: Mapping[int, WorkerPod],
    incarnations: Mapping[int, int],
    replicas: int,
    listed: Iterable[Member] = (),
) -> tuple[Member, ...]:
    """The discoverable target: alive, index below `replicas`, not draining, in natural index order.

    A draining pod below `replicas` (the job was scaled back out) is being undrained in the same
    step; it is wanted only if still `listed` (a crash left its stamp behind), else from the next
    step on, once the annotation is gone.
    """
    alive = alive_members(workers, incarnations)
    kept = set(listed)
    return tuple(
        sorted(
            w.member
            for w in workers.values()
            if w.member in alive
            and w.index < replicas
            and (w.draining_since is None or w.member in kept)
        )
    )


def arriving_members(
    workers: Mapping[int, WorkerPod], incarnations: Mapping[int, int], replicas: int
) -> set[Member]:
    """Identities that will be wanted once Ready: starting pods of their index's current
    incarnation, index below `replicas`, not draining."""
    return {
        w.member
        for w in workers.values()
        if w.starting
        and w.index < replicas
        and w.draining_since is None
        and is_current(w, incarnations)
    }


def discovered_hosts(
    job: MPIJob, members: Iterable[Member], *, cluster_domain: str = ""
) -> list[tuple[str, int]]:
    """`(fqdn, slots)` lines of `discover_hosts.sh` for `members` (the launcher first when it is a
    worker)."""
    hosts: list[tuple[str, int]] = []
    if job.spec.run_launcher_as_worker:
        hosts.append((launcher_fqdn(job, cluster_domain), launcher_slots(job.spec)))
    slots = slots_per_worker(job.spec)
    hosts.extend((worker_host(job, i, n, cluster_domain), slots) for i, n in sorted(members))
    return hosts
