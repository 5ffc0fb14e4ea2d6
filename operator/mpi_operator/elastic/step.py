"""`elastic_step`: the elastic layer's one entry point, called by the reconciler for elastic jobs.

    decision = elastic_step(job, observed.worker_pods, published_state(...), now=now, ...)

then apply the decision in `decision.py`'s order and build the children from it. One step reads the
workers (`hosts`), plans replacements (`replacement`), paces the host set (`pacing`), scales in
(`scalein`), runs the below-minReplicas clock and reports counts, events and when to come back; a
suspended job gets `_suspended_step`. Everything it needs from the past is in `published` and on the
pods, so a restarted operator decides the same (docs/architecture.md#one-step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from mpi_discovery import hostfile
from mpi_operator import reasons
from mpi_operator.api.elastic import effective_elastic_policy
from mpi_operator.api.models import ElasticPolicy, MPIJob
from mpi_operator.desired import config
from mpi_operator.desired.config import DISCOVER_HOSTS_KEY
from mpi_operator.elastic.decision import ElasticDecision
from mpi_operator.elastic.hosts import (
    WorkerPod,
    alive_members,
    arriving_members,
    discovered_hosts,
    is_current,
    read_workers,
    wanted_members,
)
from mpi_operator.elastic.identity import parse_worker_host, worker_host
from mpi_operator.elastic.pacing import Change, next_members
from mpi_operator.elastic.replacement import BELOW_MIN_REPLICAS, check_below_min, plan_replacements
from mpi_operator.elastic.scalein import plan_scale_in
from mpi_operator.elastic.state import (
    Member,
    PublishedState,
    WorkerFailure,
    state_from_config_map,
)
from mpi_operator.reasons import Event
from mpi_operator.status import format_time

HOSTS_ADDED: Final = "DiscoveryHostsAdded"
HOSTS_REMOVED: Final = "DiscoveryHostsRemoved"
HOSTS_LOST: Final = "DiscoveryHostsLost"
REPLICAS_OUT_OF_BOUNDS: Final = "ReplicasOutOfBounds"


def elastic_policy(job: MPIJob) -> ElasticPolicy:
    """The job's effective policy; ValueError for a static job (which must not come here)."""
    policy = effective_elastic_policy(job)
    if policy is None:
        raise ValueError(f"MPIJob {job.namespace}/{job.name} is not elastic")
    return policy


def effective_replicas(job: MPIJob, policy: ElasticPolicy) -> int:
    """`Worker.replicas` clamped to the policy's bounds (out-of-bounds values are not acted on)."""
    return min(max(config.worker_replicas(job), policy.min_replicas), policy.max_replicas)


def clamp_replicas(job: MPIJob) -> MPIJob:
    """The job with `Worker.replicas` clamped to its elastic bounds (unchanged when static or in
    bounds).

    For an elastic job the reconciler hands this job to `desired.build`, `plan` and `status`, so
    out-of-bounds replicas that got past admission are not acted on (`elastic_step` reports them).
    """
    policy = effective_elastic_policy(job)
    worker = job.worker
    if policy is None or worker is None:
        return job
    replicas = effective_replicas(job, policy)
    if replicas == worker.replicas:
        return job
    specs = job.spec.mpi_replica_specs.model_copy(
        update={"worker": worker.model_copy(update={"replicas": replicas})}
    )
    return job.model_copy(update={"spec": job.spec.model_copy(update={"mpi_replica_specs": specs})})


def published_state(
    job: MPIJob, config_map: Mapping[str, Any] | None, *, cluster_domain: str = ""
) -> PublishedState | None:
    """What was published: the state annotation, else what the ConfigMap's script lists, else None.

    The fallback (a ConfigMap written before the elastic layer ran, or whose annotation was removed)
    maps each listed worker host back to `(index, incarnation)`, so listed workers are not mistaken
    for never-published ones and deleted without their grace period.
    """
    state = state_from_config_map(config_map)
    if state is not None or config_map is None:
        return state
    data = config_map.get("data")
    script = data.get(DISCOVER_HOSTS_KEY) if isinstance(data, Mapping) else None
    if not isinstance(script, str):
        return None
    try:
        listed = {host for host, _ in hostfile.parse_discover_hosts(script)}
    except ValueError:
        return None
    members = [
        m for host in listed if (m := parse_worker_host(job, host, cluster_domain)) is not None
    ]
    return PublishedState(
        members=tuple(sorted(members)), incarnations={i: n for i, n in members if n}
    )


def _workers(count: int) -> str:
    return f"{count} worker" if count == 1 else f"{count} workers"


def _names(job: MPIJob, members: Iterable[Member], cluster_domain: str) -> str:
    return ", ".join(worker_host(job, i, n, cluster_domain) for i, n in sorted(members))


def elastic_step(
    job: MPIJob,
    observed_pods: Iterable[Mapping[str, Any]],
    published: PublishedState | None,
    *,
    now: datetime,
    cluster_domain: str = "",
) -> ElasticDecision:
    """The elastic decision for one reconcile of an elastic job (see the module docstring)."""
    policy = elastic_policy(job)
    clock = now.timestamp()
    replicas = effective_replicas(job, policy)
    workers = read_workers(job, observed_pods)
    state = published if published is not None else PublishedState()
    out_of_bounds, events = _check_bounds(job, policy, replicas, state)
    if job.spec.run_policy.suspend:
        return _suspended_step(
            job,
            policy,
            replicas,
            workers,
            state,
            out_of_bounds,
            events,
            now=clock,
            cluster_domain=cluster_domain,
        )

    healed = plan_replacements(
        job,
        workers,
        state,
        replicas=replicas,
        max_replacements=policy.max_replacements,
        now=clock,
        cluster_domain=cluster_domain,
    )
    incarnations = healed.incarnations
    arriving = arriving_members(workers, incarnations, replicas)
    # Ready times matter only while workers arrive: a job of thousands would build them every sync.
    ready_since = (
        {w.member: w.ready_since for w in workers.values() if w.ready_since is not None}
        if arriving
        else None
    )
    pace = next_members(
        state.members if published is not None else None,
        wanted_members(workers, incarnations, replicas, state.members),
        alive_members(workers, incarnations),
        min_workers=policy.min_replicas,
        settle_seconds=policy.settle_seconds,
        changed_at=state.changed_at,
        now=clock,
        arriving=arriving,
        ready_since=ready_since,
    )
    scale = plan_scale_in(
        workers,
        incarnations,
        replicas=replicas,
        listed=pace.members,
        removed_now=pace.removed if pace.change is Change.REMOVED else (),
        grace_seconds=policy.scale_in_grace_period_seconds,
        now=clock,
        last_change=state.changed_at,
        last_removed=state.removed,
    )
    for index in scale.retired:
        incarnations[index] = incarnations.get(index, 0) + 1

    ready = _ready(workers, incarnations, replicas)
    below = check_below_min(
        ready,
        min_replicas=policy.min_replicas,
        timeout_seconds=policy.below_min_timeout_seconds,
        state=state,
        failures=healed.failures,
        now=clock,
    )

    changed = pace.members != state.members or (published is None and bool(pace.members))
    if pace.change is Change.ADDED or (pace.change is Change.INITIAL and pace.members):
        events.append(
            Event(
                reasons.NORMAL,
                HOSTS_ADDED,
                f"discover_hosts.sh lists {_workers(len(pace.members))}; added "
                f"{_names(job, pace.added, cluster_domain)}",
            )
        )
    elif pace.change is Change.REMOVED:
        events.append(
            Event(
                reasons.NORMAL,
                HOSTS_REMOVED,
                f"discover_hosts.sh lists {_workers(len(pace.members))}; scaled in "
                f"{_names(job, pace.removed, cluster_domain)}",
            )
        )
    elif pace.change is Change.LOST:
        events.append(
            Event(
                reasons.WARNING,
                HOSTS_LOST,
                f"discover_hosts.sh lists {_workers(len(pace.members))}; dropped hosts that cannot "
                "run "
                f"{_names(job, pace.removed, cluster_domain)}",
            )
        )
    events.extend(healed.events)
    events.extend(scale.events)
    if below.started:
        events.append(
            Event(
                reasons.WARNING,
                BELOW_MIN_REPLICAS,
                f"only {ready} of minReplicas {policy.min_replicas} workers ready; the job fails "
                "if this "
                f"lasts {policy.below_min_timeout_seconds}s",
            )
        )

    waits = [w for w in (pace.wait, scale.wait, below.wait, healed.wait) if w is not None]
    wanted_after = wanted_members(workers, incarnations, replicas, pace.members)
    if changed and pace.members != wanted_after:
        waits.append(float(policy.settle_seconds))
    publish = PublishedState(
        members=pace.members,
        changed_at=clock if changed else state.changed_at,
        incarnations=_bumped(incarnations),
        replacements=healed.replacements,
        disruptions=healed.disruptions,
        reached_min=below.reached_min,
        below_min_since=below.since,
        failures=tuple(healed.failures),
        out_of_bounds_reported=out_of_bounds,
        removed=pace.removed
        if pace.change is Change.REMOVED
        else (() if changed else state.removed),
    )
    return ElasticDecision(
        discovered=discovered_hosts(job, pace.members, cluster_domain=cluster_domain),
        publish=publish,
        drain=scale.drain,
        delete=scale.delete,
        replace=healed.replace,
        requeue_after=_round_up(min(waits)) if waits else None,
        status=_status(
            policy,
            replicas,
            ready=ready,
            discovered=len(pace.members),
            draining=scale.draining,
            replacements=healed.replacements,
            disruptions=healed.disruptions,
            losses=healed.failures,
        ),
        events=events,
        fail=below.fail,
        discovery_changed=changed,
        urgent=pace.change is Change.LOST,
    )


def _ready(workers: Mapping[int, WorkerPod], incarnations: Mapping[int, int], replicas: int) -> int:
    """Workers Horovod could use now among the desired ones, each in its index's current
    incarnation."""
    return sum(
        1
        for w in workers.values()
        if w.usable and w.index < replicas and is_current(w, incarnations)
    )


def _bumped(incarnations: Mapping[int, int]) -> dict[int, int]:
    """The incarnations to publish: in index order, incarnation 0 left implicit."""
    return {i: n for i, n in sorted(incarnations.items()) if n}


def _status(
    policy: ElasticPolicy,
    replicas: int,
    *,
    ready: int,
    discovered: int,
    draining: int,
    replacements: int,
    disruptions: int,
    losses: Iterable[WorkerFailure] = (),
) -> dict[str, Any]:
    """The `status.elastic` block."""
    status: dict[str, Any] = {
        "desired": replicas,
        "ready": ready,
        "discovered": discovered,
        "draining": draining,
        "replacements": replacements,
        "disruptions": disruptions,
        "minReplicas": policy.min_replicas,
        "maxReplicas": policy.max_replicas,
    }
    if recent := [_loss(f) for f in losses]:
        status["losses"] = recent
    return status


def _loss(failure: WorkerFailure) -> dict[str, Any]:
    """One entry of `status.elastic.losses`."""
    loss: dict[str, Any] = {
        "pod": failure.pod,
        "host": failure.host,
        "kind": "Disruption" if failure.disruption else "Failure",
        "reason": failure.reason,
    }
    if failure.exit_code is not None and not failure.disruption:
        loss["exitCode"] = failure.exit_code
    if failure.at:
        loss["time"] = format_time(datetime.fromtimestamp(failure.at, UTC))
    return loss


def _check_bounds(
    job: MPIJob, policy: ElasticPolicy, replicas: int, state: PublishedState
) -> tuple[int | None, list[Event]]:
    """The out-of-bounds `Worker.replicas` (None when in bounds) and its event, once per distinct
    value.

    The value reported last is in the published state, so neither a resync nor a restarted operator
    records it again; going back in bounds forgets it."""
    requested = config.worker_replicas(job)
    if requested == replicas:
        return None, []
    if state.out_of_bounds_reported == requested:
        return requested, []
    return requested, [
        Event(
            reasons.WARNING,
            REPLICAS_OUT_OF_BOUNDS,
            f"Worker replicas {requested} outside elasticPolicy bounds "
            f"[{policy.min_replicas}, {policy.max_replicas}]; running {replicas}",
        )
    ]


def _suspended_step(
    job: MPIJob,
    policy: ElasticPolicy,
    replicas: int,
    workers: Mapping[int, WorkerPod],
    state: PublishedState,
    out_of_bounds: int | None,
    events: list[Event],
    *,
    now: float,
    cluster_domain: str,
) -> ElasticDecision:
    """A suspended job: nothing listed, nothing drained or replaced, counts from the observed pods.

    Suspending deletes the launcher (its horovodrun and blacklist with it) and the workers, so the
    script lists no host and a resumed job starts from an empty list: its recreated workers join as
    they become Ready instead of being taken for lost ones (and counted against `maxReplacements`).
    The below-minReplicas clock stops and waits, as at the start, for the resumed job to reach
    minReplicas. Incarnations stay: a resumed launcher has never seen any host name, so none is
    retired."""
    incarnations = dict(state.incarnations)
    for seen in workers.values():
        if seen.incarnation > incarnations.get(seen.index, 0):
            incarnations[seen.index] = seen.incarnation
    if state.members:
        events.append(
            Event(
                reasons.NORMAL,
                HOSTS_REMOVED,
                f"discover_hosts.sh lists 0 workers; the job is suspended, dropped "
                f"{_names(job, state.members, cluster_domain)}",
            )
        )
    publish = PublishedState(
        members=(),
        changed_at=now if state.members else state.changed_at,
        incarnations=_bumped(incarnations),
        replacements=state.replacements,
        disruptions=state.disruptions,
        failures=state.failures,
        out_of_bounds_reported=out_of_bounds,
    )
    return ElasticDecision(
        discovered=discovered_hosts(job, (), cluster_domain=cluster_domain),
        publish=publish,
        status=_status(
            policy,
            replicas,
            ready=_ready(workers, incarnations, replicas),
            discovered=0,
            draining=0,
            replacements=state.replacements,
            disruptions=state.disruptions,
            losses=state.failures,
        ),
        events=events,
        discovery_changed=bool(state.members),
    )


def _round_up(seconds: float) -> float:
    """Millisecond resolution, never zero: a requeue lands just after the deadline, not just
    before."""
    return max(math.ceil(seconds * 1000) / 1000, 0.001)
