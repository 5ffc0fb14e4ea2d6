"""The reconciler's elastic half: runs the pure `elastic_step` and applies its `ElasticDecision` in order.

For an elastic job (an `elasticPolicy`, or a launcher running `horovodrun --host-discovery-script`,
`api.elastic.effective_elastic_policy`) the reconciler asks `prepare` for an `ElasticSync`: the job with
its replicas clamped to the bounds, the decision, and the values the desired builders take (host names
per pod incarnation, the published state on the ConfigMap, the launcher's bound variables, the gang
size). It then applies, each write only after the previous one succeeded (`elastic/decision.py`):

1. `drain` patches on worker pods;                                        (`drain`)
2. the plan's Service / ConfigMap / Secret / PodGroup (the script and the state annotation);
3. the launcher pod annotation, so the kubelet refreshes `discover_hosts.sh` now; (`touch_launcher`)
4. replaced / scaled-in worker pods deleted with a uid precondition;      (`delete_pods`)
5. the rest of the plan: missing worker pods, the launcher Job;
6. status (`elastic` block, the Failed condition of `fail`) and events.   (`finish_status`)

A suspended job runs the step too, which for it lists no host, drains and replaces nothing, and counts
`status.elastic` from the pods as they are (`ready` falls to 0 as the suspend deletes them); resuming
starts from an empty host list. A finished job (the MPIJob Succeeded or Failed, or its launcher Job
finished) runs no step and its `status.elastic` is frozen as it was when the job ended: that history
(how many workers were discovered, how many replaced) is what a user looks at afterwards, and the
workers going away per cleanPodPolicy is not news about the run. Every job keeps the clamped replicas,
the launcher variables and the gang size so nothing else changes under it.

One write for a finished job: when the elastic layer failed it (below minReplicas too long), the
launcher Job still runs horovodrun; `stop_launcher` sets its `activeDeadlineSeconds` so the Job
controller ends it (`elastic/launcher_stop.py`), after the plan's cleanup and in a sync that has read the
stored Failed condition back, so the below-minReplicas reason is never replaced by the launcher's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mpi_operator import elastic, planning, reasons
from mpi_operator.api import constants as c
from mpi_operator.api.elastic import effective_elastic_policy
from mpi_operator.api.models import ElasticPolicy, MPIJob
from mpi_operator.conditions import set_condition
from mpi_operator.controller.applier import Applied, DeletedRecently
from mpi_operator.elastic.launcher_env import DISCOVERY_REVISION_ANNOTATION
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.planning import Observed, Plan
from mpi_operator.planning.observed import is_job_finished, is_terminating, pod_phase
from mpi_operator.reasons import Event
from mpi_operator.status import StatusUpdate, format_time

log = logging.getLogger(__name__)

_FIRST_AFTER_SCRIPT = frozenset({"Pod", "Job"})
"""Plan actions on these kinds come after the script, the launcher touch and the deletions."""


@dataclasses.dataclass(frozen=True)
class ElasticSync:
    """One sync's elastic inputs and outputs; `decision` is None once the job has finished."""

    job: MPIJob
    policy: ElasticPolicy
    decision: elastic.ElasticDecision | None
    build_overrides: Mapping[str, Any]
    """Keyword arguments for `desired.build`."""
    launcher_stop: elastic.LauncherStop | None = None
    """A finished job's launcher Job to stop (`stop_launcher`)."""


def prepare(job: MPIJob, observed: Observed, *, now: datetime, cluster_domain: str) -> ElasticSync | None:
    """The elastic part of this sync, or None for a static job."""
    policy = effective_elastic_policy(job) if job.worker is not None else None
    if policy is None:
        return None
    launcher = observed.launcher_job
    finished = planning.is_finished(job) or (launcher is not None and is_job_finished(launcher))
    decision = None
    if not finished:
        published = elastic.published_state(job, observed.config_map, cluster_domain=cluster_domain)
        # Unclamped: the step reports replicas outside the bounds before they are clamped below.
        decision = elastic.elastic_step(
            job, observed.worker_pods, published, now=now, cluster_domain=cluster_domain
        )
    clamped = elastic.clamp_replicas(job)
    overrides: dict[str, Any] = {
        "launcher_extra_env": elastic.launcher_env(clamped, policy),
        "pod_group_min_member": elastic.pod_group_min_member(policy),
    }
    if decision is not None:
        replicas = clamped.worker.replicas if clamped.worker is not None else 0
        incarnations = decision.incarnations
        overrides.update(
            discovered=decision.discovered,
            worker_hostnames={
                i: elastic.worker_hostname(clamped, i, incarnations.get(i, 0)) for i in range(replicas)
            },
            worker_annotations={i: elastic.incarnation_annotations(n) for i, n in incarnations.items() if n},
            config_map_annotations=elastic.state_annotations(decision.publish),
        )
    stop = elastic.launcher_stop(job, launcher, now=now) if finished else None
    return ElasticSync(
        job=clamped, policy=policy, decision=decision, build_overrides=overrides, launcher_stop=stop
    )


def split_plan(plan: Plan) -> tuple[Plan, Plan]:
    """(the writes up to the script, the pod and launcher writes after it), conflicts on the second."""
    actions = list(plan.actions)
    cut = next((i for i, a in enumerate(actions) if a.ref.kind in _FIRST_AFTER_SCRIPT), len(actions))
    head = dataclasses.replace(plan, actions=tuple(actions[:cut]), conflicts=())
    tail = dataclasses.replace(plan, actions=tuple(actions[cut:]))
    return head, tail


def merge_applied(first: Applied, second: Applied) -> Applied:
    return Applied(
        conflicts=[*first.conflicts, *second.conflicts],
        warnings=[*first.warnings, *second.warnings],
        written={**first.written, **second.written},
    )


async def drain(kube: Kube, job: MPIJob, decision: elastic.ElasticDecision) -> None:
    """Step 1: stamp (or clear) the draining annotations before the script drops (or re-adds) a host."""
    for patch in decision.drain:
        try:
            await kube.patch(resources.POD, patch.name, patch.merge_patch(), namespace=job.namespace)
        except errors.NotFound:
            log.info("pod %s/%s is gone; its drain stamp is moot", job.namespace, patch.name)


async def touch_launcher(
    kube: Kube, job: MPIJob, observed: Observed, decision: elastic.ElasticDecision
) -> None:
    """Step 3: put the script's revision on each live launcher pod that does not carry it yet.

    Comparing instead of following `discovery_changed` makes a crash between the ConfigMap write and this
    patch harmless: the next sync finds the old revision and touches the pod then."""
    annotations = elastic.discovery_revision_annotation(decision.discovered)
    revision = annotations[DISCOVERY_REVISION_ANNOTATION]
    for pod in observed.launcher_pods:
        metadata = pod.get("metadata") or {}
        if is_terminating(pod) or pod_phase(pod) in ("Succeeded", "Failed"):
            continue
        if (metadata.get("annotations") or {}).get(DISCOVERY_REVISION_ANNOTATION) == revision:
            continue
        with contextlib.suppress(errors.NotFound):  # gone: its successor mounts the current script
            await kube.patch(
                resources.POD,
                str(metadata.get("name")),
                {"metadata": {"annotations": annotations}},
                namespace=job.namespace,
            )


async def delete_pods(
    kube: Kube, job: MPIJob, decision: elastic.ElasticDecision, deleted: DeletedRecently
) -> None:
    """Step 4: replaced and scaled-in workers, each preconditioned on the uid the step saw."""
    for deletion in [*decision.replace, *decision.delete]:
        if deletion.uid is not None and deletion.uid in deleted:
            continue
        log.info("delete Pod %s/%s (%s)", job.namespace, deletion.name, deletion.reason)
        try:
            await kube.delete(resources.POD, deletion.name, namespace=job.namespace, uid=deletion.uid)
        except errors.NotFound:
            pass
        except errors.Conflict:
            log.info(
                "Pod %s/%s: uid precondition failed, a successor holds the name", job.namespace, deletion.name
            )
        if deletion.uid is not None:
            deleted.add(deletion.uid)


async def stop_launcher(kube: Kube, job: MPIJob, stop: elastic.LauncherStop) -> bool:
    """After a below-minReplicas failure: give the launcher Job its deadline (gone already: nothing to do).

    A merge patch of that one field: setting the same deadline twice is harmless, and the Job's status,
    which the Job controller keeps changing, cannot make it conflict. Returns whether it was written (the
    reconciler then records `LauncherStopped` on the MPIJob; the Job shows `DeadlineExceeded`)."""
    log.info("stop launcher Job %s/%s: %s", job.namespace, stop.name, dict(stop.patch))
    try:
        await kube.patch(resources.JOB, stop.name, dict(stop.patch), namespace=job.namespace)
    except errors.NotFound:
        return False
    return True


def finish_status(update: StatusUpdate, decision: elastic.ElasticDecision, *, now: datetime) -> StatusUpdate:
    """Step 6: the `elastic` status block and, when the step says so, the Failed condition.

    The decision's own events are not added here: they are recorded whether or not the status changes."""
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
        counters.append("failed")
    return dataclasses.replace(update, status=status, events=tuple(events), counters=tuple(counters))
