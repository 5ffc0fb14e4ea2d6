"""Gang scheduling as pure functions: placing a group's pods together with the default filters and
score (`place`), the cluster-wide `minResources` check (`resource_gap`), the words of a gang that
cannot go, and the PodGroup phases of scheduler-plugins' coscheduling
(pkg/controllers/podgroup_controller.go) and of Volcano (volcano-sh/apis scheduling/v1beta1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.scheduling import filters, score
from kubesim.scheduling import resources as res
from kubesim.scheduling.filters import Failure, NodeInfo
from kubesim.scheduling.resources import Resources

GroupKey = tuple[str, str, str]
"""(flavor, namespace, PodGroup name)."""
COSCHEDULING = "coscheduling"
COSCHEDULING_SCHEDULER_NAME = "scheduler-plugins-scheduler"
"""The scheduler-plugins scheduler's name in its own manifests (the operator's default too)."""
VOLCANO_SCHEDULER_NAME = "volcano"
VOLCANO = "volcano"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60


def group_of(pod: Mapping[str, Any]) -> GroupKey | None:
    """The PodGroup a gang scheduler's pod names (coscheduling's label, Volcano's annotation)."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    name = spec.get("schedulerName")
    if name == COSCHEDULING_SCHEDULER_NAME:
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        flavor = COSCHEDULING
    elif name == VOLCANO_SCHEDULER_NAME:
        group = (meta.get("annotations") or {}).get(VOLCANO_GROUP_ANNOTATION)
        flavor = VOLCANO
    else:
        return None
    return (flavor, str(meta.get("namespace", "")), str(group)) if group else None


@dataclass(frozen=True)
class Member:
    """A pending pod of a group."""

    key: Hashable
    spec: Mapping[str, Any]
    requests: Resources
    scored: Resources


def place(
    members: Sequence[Member], nodes: Sequence[NodeInfo]
) -> tuple[dict[Hashable, str], dict[Hashable, dict[str, Failure]]]:
    """Each member in turn on the best node left once the members before it are counted there, as
    the pods of a gang reserve nodes one after another: (placements, each unplaced member's
    failures by node)."""
    view = {
        n.name: dataclasses.replace(n, requested=dict(n.requested), scored=dict(n.scored))
        for n in nodes
    }
    placed: dict[Hashable, str] = {}
    failed: dict[Hashable, dict[str, Failure]] = {}
    for member in members:
        feasible: list[NodeInfo] = []
        failures: dict[str, Failure] = {}
        for info in view.values():
            failure = filters.filter_node(member.spec, member.requests, info)
            if failure is None:
                feasible.append(info)
            else:
                failures[info.name] = failure
        if not feasible:
            failed[member.key] = failures
            continue
        chosen = score.pick(member.scored, feasible)
        placed[member.key] = chosen.name
        res.add(chosen.requested, member.requests)
        res.add(chosen.scored, member.scored)
        chosen.pods += 1
    return placed, failed


def resource_gap(
    min_resources: Mapping[str, int], min_member: int, nodes: Sequence[NodeInfo]
) -> Resources:
    """coscheduling's `CheckClusterResource`: what of `minResources` (and `minMember` pods) the
    free room of all nodes together lacks; empty when it fits. Unlimited nodes lack nothing."""
    wanted = {name: value for name, value in min_resources.items() if value > 0}
    wanted[res.PODS] = min_member
    for node in nodes:
        if node.unlimited:
            return {}
        for name in list(wanted):
            if name == res.PODS:
                free = node.allocatable.get(res.PODS, 0) - node.pods
            else:
                free = node.allocatable.get(name, 0) - node.requested.get(name, 0)
            wanted[name] -= max(free, 0)
            if wanted[name] <= 0:
                del wanted[name]
        if not wanted:
            return {}
    return wanted


def not_enough_siblings(flavor: str, pod: str, count: int, min_member: int) -> str:
    if flavor == VOLCANO:
        return f"pod group is not ready, {count} Pending, {min_member} minAvailable"
    return (
        f"pre-filter pod {pod} cannot find enough sibling pods, current pods number: {count}, "
        f"minMember of group: {min_member}"
    )


def gang_unschedulable(pending: int, unschedulable: int, min_member: int) -> str:
    """Volcano's words for a gang that cannot go as a whole (its PodGroup condition's)."""
    return (
        f"{unschedulable}/{pending} tasks in gang unschedulable: pod group is not ready, "
        f"{pending} Pending, {min_member} minAvailable; Pending: {unschedulable} Unschedulable, "
        f"{pending - unschedulable} Schedulable"
    )


def permit_timeout(seconds: int) -> str:
    """The framework's words for a pod rejected after waiting at coscheduling's Permit."""
    return f"rejected due to timeout after waiting {seconds}s at plugin Coscheduling"


@dataclass(frozen=True)
class Counts:
    pods: int
    running: int
    succeeded: int
    failed: int
    scheduled: int
    """Bound (nodeName set)."""


def counts(pods: Sequence[Mapping[str, Any]]) -> Counts:
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    return Counts(
        pods=len(pods),
        running=phases.count("Running"),
        succeeded=phases.count("Succeeded"),
        failed=phases.count("Failed"),
        scheduled=sum(1 for p in pods if (p.get("spec") or {}).get("nodeName")),
    )


def coscheduling_phase(phase: str, min_member: int, seen: Counts) -> str:
    """The coscheduling PodGroup controller's next phase: Pending, Scheduling once minMember pods
    exist, Running once minMember run (or have succeeded), Failed or Finished for good."""
    if phase in ("Finished", "Failed"):
        return phase
    if phase in ("", "Pending"):
        return "Scheduling" if seen.pods >= min_member and phase == "Pending" else "Pending"
    if seen.pods < min_member:
        return "Pending"
    up = seen.running + seen.succeeded
    new = "Running" if up >= min_member else "Scheduling"
    if seen.failed and seen.failed + up >= min_member:
        new = "Failed"
    if seen.succeeded >= min_member:
        new = "Finished"
    return new


def volcano_phase(phase: str, min_member: int, seen: Counts, admitted: bool) -> str:
    """Volcano's PodGroup phase: Pending until the group is admitted (its minResources fit: the
    enqueue action), Inqueue, Running once minMember pods are bound and running or done, Unknown
    when a running gang lost members, Completed when every pod ended and minMember succeeded."""
    up = seen.running + seen.succeeded
    if seen.pods and seen.succeeded + seen.failed == seen.pods and seen.succeeded >= min_member:
        return "Completed"
    if phase in ("", "Pending"):
        return "Inqueue" if admitted else "Pending"
    if up >= min_member:
        return "Running"
    if phase == "Running" and seen.failed:
        return "Unknown"
    return phase
