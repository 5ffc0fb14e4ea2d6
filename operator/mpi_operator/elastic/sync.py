"""One sync of an elastic job, pure: the step's decision as the builders' inputs, the plan's elastic
writes, and the `status.elastic` block afterwards.

A job is elastic with an `elasticPolicy` or a launcher running `horovodrun --host-discovery-script`
(`api.elastic.effective_elastic_policy`). A finished job runs no step: its `status.elastic` stays as
it ended, and its one write is the launcher stop of a job failed below minReplicas
(`launcher_stop.py`). It keeps the clamped replicas, launcher variables and gang size, so nothing
else changes under it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from mpi_operator import reasons
from mpi_operator.api import constants as c
from mpi_operator.api.elastic import effective_elastic_policy
from mpi_operator.api.models import ElasticPolicy, MPIJob
from mpi_operator.conditions import is_finished, set_condition
from mpi_operator.desired import ElasticInputs
from mpi_operator.elastic.decision import ElasticDecision
from mpi_operator.elastic.identity import incarnation_annotations, worker_hostname
from mpi_operator.elastic.launcher_env import (
    DISCOVERY_REVISION_ANNOTATION,
    discovery_revision_annotation,
    launcher_env,
    pod_group_min_member,
)
from mpi_operator.elastic.launcher_stop import LAUNCHER_STOPPED, LauncherStop, launcher_stop
from mpi_operator.elastic.state import state_annotations
from mpi_operator.elastic.step import clamp_replicas, elastic_step, published_state
from mpi_operator.objects import (
    POD_FAILED,
    POD_SUCCEEDED,
    is_job_finished,
    is_terminating,
    metadata,
    name_of,
    pod_phase,
)
from mpi_operator.planning import Action, Delete, ElasticWrites, ObjectRef, Observed, Patch, Phase
from mpi_operator.reasons import Event
from mpi_operator.status import JobCounter, StatusUpdate, format_time


@dataclasses.dataclass(frozen=True)
class ElasticSync:
    """One sync's elastic part; `decision` is None once the job has finished."""

    job: MPIJob
    """The job with its worker replicas clamped to the bounds: out-of-bounds values are not acted
    on."""
    policy: ElasticPolicy
    decision: ElasticDecision | None
    inputs: ElasticInputs
    writes: ElasticWrites


def prepare(
    job: MPIJob, observed: Observed, *, now: datetime, cluster_domain: str
) -> ElasticSync | None:
    """The elastic part of this sync, or None for a static job."""
    policy = effective_elastic_policy(job) if job.worker is not None else None
    if policy is None:
        return None
    launcher = observed.launcher_job
    finished = is_finished(job.status) or (launcher is not None and is_job_finished(launcher))
    decision = None
    if not finished:
        published = published_state(job, observed.config_map, cluster_domain=cluster_domain)
        # Unclamped: the step reports replicas outside the bounds before they are clamped below.
        decision = elastic_step(
            job, observed.worker_pods, published, now=now, cluster_domain=cluster_domain
        )
    clamped = clamp_replicas(job)
    inputs = ElasticInputs(
        launcher_env=tuple(launcher_env(clamped, policy)),
        pod_group_min_member=pod_group_min_member(clamped, policy),
    )
    actions: list[Action] = []
    if decision is not None:
        replicas = clamped.worker.replicas if clamped.worker is not None else 0
        incarnations = decision.incarnations
        inputs = dataclasses.replace(
            inputs,
            discovered=tuple(decision.discovered),
            worker_hostnames={
                i: worker_hostname(clamped, i, incarnations.get(i, 0)) for i in range(replicas)
            },
            worker_annotations={
                i: incarnation_annotations(n) for i, n in incarnations.items() if n
            },
            config_map_annotations=state_annotations(decision.publish),
        )
        actions.extend(decision_actions(job, decision, observed.launcher_pods))
    stop = launcher_stop(job, launcher, now=now) if finished else None
    if stop is not None:
        actions.append(stop_action(job, stop))
    writes = ElasticWrites(
        actions=tuple(actions),
        paces_scale_in=decision is not None,
        launcher_ready_workers=policy.min_replicas,
        urgent=decision is not None and decision.urgent,
    )
    return ElasticSync(job=clamped, policy=policy, decision=decision, inputs=inputs, writes=writes)


def _pod(job: MPIJob, name: str) -> ObjectRef:
    return ObjectRef("v1", "Pod", job.namespace, name)


def decision_actions(
    job: MPIJob, decision: ElasticDecision, launcher_pods: Iterable[Mapping[str, Any]]
) -> list[Action]:
    """The step's pod writes: the launcher touch, drains, the deletions (replaced ones first)."""
    drains: list[Action] = [
        Patch(
            ref=_pod(job, drain.name),
            patch=drain.merge_patch(),
            phase=Phase.DRAIN,
            why="draining"
            if any(v is not None for v in drain.annotations.values())
            else "drain cleared",
        )
        for drain in decision.drain
    ]
    actions: list[Action] = []
    annotations = discovery_revision_annotation(decision.discovered)
    revision = annotations[DISCOVERY_REVISION_ANNOTATION]
    # Compared with what each pod carries rather than following `discovery_changed`, so a crash
    # between the ConfigMap write and the touch is repaired by the next sync.
    for pod in launcher_pods:
        if is_terminating(pod) or pod_phase(pod) in (POD_SUCCEEDED, POD_FAILED):
            continue
        if (metadata(pod).get("annotations") or {}).get(DISCOVERY_REVISION_ANNOTATION) == revision:
            continue
        actions.append(
            Patch(
                ref=_pod(job, name_of(pod)),
                patch={"metadata": {"annotations": annotations}},
                phase=Phase.ANNOUNCE,
                why=f"discover_hosts.sh revision {revision}",
            )
        )
    actions.extend(drains)
    actions.extend(
        Delete(
            ref=_pod(job, gone.name),
            uid=gone.uid,
            phase=Phase.RELEASE,
            why=gone.reason,
            grace_period_seconds=0 if gone.force else None,
        )
        for gone in [*decision.replace, *decision.delete]
    )
    return actions


def stop_action(job: MPIJob, stop: LauncherStop) -> Patch:
    """A merge patch of the deadline alone: setting it twice is harmless, and the Job's status,
    which the Job controller keeps changing, cannot make it conflict."""
    return Patch(
        ref=ObjectRef("batch/v1", "Job", job.namespace, stop.name),
        patch=dict(stop.patch),
        phase=Phase.STOP,
        why="stop the launcher: "
        f"spec.activeDeadlineSeconds={stop.patch['spec']['activeDeadlineSeconds']}",
        events=(Event(reasons.NORMAL, LAUNCHER_STOPPED, stop.message),),
    )


def finish_status(
    update: StatusUpdate, decision: ElasticDecision, *, now: datetime
) -> StatusUpdate:
    """The `elastic` status block and, when the step says so, the Failed condition.

    The decision's own events are not added here: they are recorded whether or not the status
    changes."""
    status = dict(update.status)
    status["elastic"] = dict(decision.status)
    events = list(update.events)
    counters = list(update.counters)
    fail = decision.fail
    stamp = format_time(now)
    if fail is not None and set_condition(
        status, c.CONDITION_FAILED, "True", fail.reason, fail.message, stamp
    ):
        status.setdefault("completionTime", stamp)
        events.append(Event(reasons.WARNING, fail.reason, fail.message))
        counters.append(JobCounter.FAILED)
    return dataclasses.replace(
        update, status=status, events=tuple(events), counters=tuple(counters)
    )
