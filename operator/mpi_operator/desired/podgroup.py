"""Gang scheduling: the PodGroup `<job>` (Volcano or scheduler-plugins) and the pods' decoration.

Upstream `pkg/controller/podgroup.go` field for field: `minMember` (minAvailable, else the pods that
exist before the gang must go: the workers, plus the launcher when it is created at startup), the
Volcano queue and priority class or scheduler-plugins' timeout, the scheduler name and group marker
on the pods, and `minResources` summed over the first minMember pods by PriorityClass value (given
as a mapping, so this stays pure; an unknown class counts 0). Fields are omitted where Go's
`omitempty` would omit them, so the objects equal upstream's JSON. Where upstream counts a launcher
that `WaitForWorkersReady` holds back until the workers run, the group would wait for itself: here
that launcher is a member outside minMember (docs/elastic.md, "Gang scheduling").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.api.quantities import (
    Quantity,
    ResourceList,
    add_resources,
    pod_containers,
    render_resource_list,
)
from mpi_operator.desired import naming
from mpi_operator.objects import KubeObject
from mpi_operator.settings import (
    DEFAULT_SCHEDULER_PLUGINS_NAME as DEFAULT_SCHEDULER_PLUGINS_NAME,
)  # the builders' default
from mpi_operator.settings import GangScheduler

VOLCANO: Final = "volcano"
SCHEDULER_PLUGINS: Final = "scheduler-plugins"
VOLCANO_SCHEDULER_NAME: Final = "volcano"
VOLCANO_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"
SCHEDULER_PLUGINS_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
SCHEDULER_PLUGINS_POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"


def scheduler_name(
    gang: GangScheduler, scheduler_plugins_name: str = DEFAULT_SCHEDULER_PLUGINS_NAME
) -> str:
    return VOLCANO_SCHEDULER_NAME if gang == VOLCANO else scheduler_plugins_name


def decorate_pod_template(
    template: KubeObject,
    job: MPIJob,
    gang: GangScheduler | None,
    scheduler_plugins_name: str = DEFAULT_SCHEDULER_PLUGINS_NAME,
) -> None:
    """Upstream `decoratePodTemplateSpec` on a template copy the caller owns (no-op without
    gang)."""
    if gang is None:
        return
    metadata = template.setdefault("metadata", {})
    template.setdefault("spec", {})["schedulerName"] = scheduler_name(gang, scheduler_plugins_name)
    if gang == VOLCANO:
        annotations = metadata.get("annotations") or {}
        metadata["annotations"] = {
            **annotations,
            VOLCANO_GROUP_NAME_ANNOTATION: naming.pod_group_name(job),
        }
    else:
        labels = metadata.get("labels") or {}
        metadata["labels"] = {
            **labels,
            SCHEDULER_PLUGINS_POD_GROUP_LABEL: naming.pod_group_name(job),
        }


def launcher_in_gang(job: MPIJob) -> bool:
    """Whether the launcher's pod is among the first minMember: only when it is created with the
    workers. Under `WaitForWorkersReady` it comes once the workers are Ready, which they cannot be
    while the group waits for it; it then joins the running group as an extra member."""
    workers = job.worker.replicas if job.worker is not None else 0
    return job.spec.launcher_creation_policy == c.LAUNCHER_CREATION_AT_STARTUP or workers == 0


def min_available(job: MPIJob, default: int | None = None) -> int:
    """Upstream `calculateMinAvailable`: the policy's minAvailable, else `default`, else the
    workers, + 1 for a launcher created at startup (upstream: always + 1). A minAvailable above
    the workers counts a launcher that waits for them, so it is capped at the workers there."""
    policy = job.spec.run_policy.scheduling_policy
    workers = job.worker.replicas if job.worker is not None else 0
    if policy is not None and policy.min_available is not None:
        if launcher_in_gang(job):
            return policy.min_available
        return min(policy.min_available, workers)
    if default is not None:
        return default
    return workers + (1 if launcher_in_gang(job) else 0)


def _pc_name(template: Mapping[str, Any]) -> str:
    spec = template.get("spec")
    name = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else ""


def priority_class_name(job: MPIJob) -> str:
    """Upstream `calculatePriorityClassName`: policy, else launcher template, else worker
    template."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return policy.priority_class
    if name := _pc_name(job.launcher.template):
        return name
    if job.worker is not None and (name := _pc_name(job.worker.template)):
        return name
    return ""


@dataclass
class _Replica:
    replica_type: str
    priority: int
    replicas: int
    template: Mapping[str, Any]


def compute_min_resources(
    job: MPIJob, min_member: int, priority_classes: Mapping[str, int]
) -> ResourceList | None:
    """Upstream `calculatePGMinResources` / `calPGMinResource`; a launcher outside the first gang
    (`launcher_in_gang`) counts nothing."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.min_resources is not None:
        return {name: Quantity.parse(value) for name, value in policy.min_resources.items()}
    if min_member == 0:
        return None
    if not launcher_in_gang(job):
        # The first gang is workers only: minMember of them (or all, when fewer).
        if job.worker is None:
            return {}
        return _add_template({}, job.worker.template, min(job.worker.replicas, min_member))
    order = [_Replica(c.REPLICA_LAUNCHER, 0, job.launcher.replicas, job.launcher.template)]
    if job.worker is not None:
        order.append(_Replica(c.REPLICA_WORKER, 0, job.worker.replicas, job.worker.template))
    for replica in order:
        replica.priority = priority_classes.get(_pc_name(replica.template), 0)
    order.sort(key=lambda r: r.priority, reverse=True)  # stable: ties keep Launcher, Worker
    if len(order) > 1 and order[0].replicas + order[1].replicas > min_member:
        # Equal priorities: the workers give way; otherwise the lower-priority replica type does.
        if order[0].priority == order[1].priority:
            worker = next(r for r in order if r.replica_type == c.REPLICA_WORKER)
            worker.replicas = min_member - 1
        else:
            order[1].replicas = min_member - 1
    total: ResourceList = {}
    for replica in order:
        total = _add_template(total, replica.template, replica.replicas)
    return total


def _add_template(total: ResourceList, template: Mapping[str, Any], replicas: int) -> ResourceList:
    for container in pod_containers(template):
        resources = container.get("resources")
        if isinstance(resources, Mapping):
            total = add_resources(total, resources, replicas)
    return total


def build_pod_group(
    job: MPIJob,
    gang: GangScheduler,
    priority_classes: Mapping[str, int] | None = None,
    *,
    min_member: int | None = None,
) -> KubeObject:
    """The PodGroup `<job>` for the configured gang scheduler.

    `min_member` replaces the default (elastic jobs: minReplicas, + 1 for a launcher created at
    startup); an explicit `schedulingPolicy.minAvailable` still wins."""
    min_member = min_available(job, min_member)
    resources = compute_min_resources(job, min_member, priority_classes or {})
    metadata = naming.object_meta(job, naming.pod_group_name(job), {})
    del metadata["labels"]  # upstream's PodGroup has none
    policy = job.spec.run_policy.scheduling_policy
    spec: KubeObject = {"minMember": min_member}
    if gang == VOLCANO:
        queue = (policy.queue if policy is not None else None) or job.metadata.get(
            "annotations", {}
        ).get(VOLCANO_QUEUE_NAME_ANNOTATION, "")
        if queue:
            spec["queue"] = queue
        if pc := priority_class_name(job):
            spec["priorityClassName"] = pc
        if resources is not None:
            spec["minResources"] = render_resource_list(resources)
        api_version = VOLCANO_API_VERSION
    else:
        timeout = policy.schedule_timeout_seconds if policy is not None else None
        spec["scheduleTimeoutSeconds"] = timeout if timeout is not None else 0
        if resources:
            spec["minResources"] = render_resource_list(resources)
        api_version = SCHEDULER_PLUGINS_API_VERSION
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}
