"""DefaultPreemption's choices as pure functions (pkg/scheduler/framework/preemption and
plugins/defaultpreemption): which pods to remove from a node so that a pod fits (`select_victims`:
all lower-priority pods out, then as many back as still fit, budget-violating ones first, the most
important first), which node to preempt on (`pick_node`), and the outcome over the cluster
(`preempt`), whose failures make the FailedScheduling message's `preemption:` part.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.admission.builtin import selector_matches
from kubesim.scheduling import filters, messages
from kubesim.scheduling.filters import Failure, NodeInfo
from kubesim.scheduling.resources import Resources

_LATEST = "~"  # sorts after every RFC 3339 stamp: a pod not started yet counts as started now


@dataclass(frozen=True)
class PodOnNode:
    """A pod bound to a node, as preemption weighs it."""

    namespace: str
    name: str
    priority: int
    requests: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    start: str = ""
    """status.startTime (empty: not started)."""


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it."""

    namespace: str
    selector: Mapping[str, Any] | None
    disruptions_allowed: int
    disrupted: frozenset[str] = frozenset()
    """status.disruptedPods' names."""


@dataclass(frozen=True)
class Victims:
    node: str
    pods: tuple[PodOnNode, ...]
    """The most important first."""
    pdb_violations: int = 0


def _importance(pod: PodOnNode) -> tuple[int, str]:
    """`util.MoreImportantPod` as a sort key: higher priority, then the earlier start, first."""
    return (-pod.priority, pod.start or _LATEST)


def _without(node: NodeInfo, pods: Sequence[PodOnNode]) -> NodeInfo:
    requested = dict(node.requested)
    for pod in pods:
        for name, value in pod.requests.items():
            requested[name] = requested.get(name, 0) - value
    return dataclasses.replace(node, requested=requested, pods=node.pods - len(pods))


class Budgets:
    """Budgets indexed by one `matchLabels` pair each, so a pod is matched against the few that
    could select it: every pod of a preemption against every budget grew with jobs squared."""

    def __init__(self, budgets: Sequence[Budget]) -> None:
        self.budgets = tuple(budgets)
        self._by_label: dict[tuple[str, str, str], list[int]] = {}
        self._unindexed: list[int] = []
        for i, budget in enumerate(self.budgets):
            selector = budget.selector or {}
            match = selector.get("matchLabels") or {}
            if match:
                key, value = min(match.items())
                self._by_label.setdefault((budget.namespace, key, str(value)), []).append(i)
            elif selector.get("matchExpressions"):
                self._unindexed.append(i)

    def selecting(self, pod: PodOnNode) -> list[int]:
        """The budgets whose selector selects `pod`; an empty or missing selector selects none."""
        if not pod.labels:
            return []
        candidates = {
            i
            for key, value in pod.labels.items()
            for i in self._by_label.get((pod.namespace, key, value), ())
        }
        candidates.update(i for i in self._unindexed if self.budgets[i].namespace == pod.namespace)
        labels = dict(pod.labels)
        return [
            i
            for i in sorted(candidates)
            if selector_matches(dict(self.budgets[i].selector or {}), labels)
        ]


def _indexed(budgets: Sequence[Budget] | Budgets) -> Budgets:
    return budgets if isinstance(budgets, Budgets) else Budgets(budgets)


def split_by_budgets(
    pods: Sequence[PodOnNode], budgets: Sequence[Budget] | Budgets
) -> tuple[list[PodOnNode], list[PodOnNode]]:
    """`filterPodsWithPDBViolation`: (violating, non-violating), in the given order. Each budget's
    allowance is used up pod by pod; a pod already in a budget's disruptedPods does not use it; an
    empty or missing selector selects nothing here."""
    index = _indexed(budgets)
    allowed: dict[int, int] = {}
    violating: list[PodOnNode] = []
    fine: list[PodOnNode] = []
    for pod in pods:
        violated = False
        for i in index.selecting(pod):
            budget = index.budgets[i]
            if pod.name in budget.disrupted:
                continue
            allowed[i] = allowed.get(i, budget.disruptions_allowed) - 1
            violated = violated or allowed[i] < 0
        (violating if violated else fine).append(pod)
    return violating, fine


def select_victims(
    spec: Mapping[str, Any],
    requests: Mapping[str, int],
    priority: int,
    node: NodeInfo,
    pods: Sequence[PodOnNode],
    budgets: Sequence[Budget] | Budgets = (),
) -> Victims | Failure:
    """`SelectVictimsOnNode`: the fewest lower-priority pods of `node` whose removal lets the pod
    fit, or why the node cannot be made to fit."""
    lower = sorted((p for p in pods if p.priority < priority), key=_importance)
    if not lower:
        return Failure((messages.NO_VICTIMS,), resolvable=False)
    emptied = _without(node, lower)
    failure = filters.filter_node(spec, requests, emptied)
    if failure is not None:
        return failure
    violating, fine = split_by_budgets(lower, budgets)
    removed = list(lower)
    victims: list[PodOnNode] = []
    violations = 0
    for group, counts in ((violating, True), (fine, False)):
        for pod in group:
            removed.remove(pod)
            if filters.filter_node(spec, requests, _without(node, removed)) is not None:
                removed.append(pod)
                victims.append(pod)
                violations += counts
    return Victims(node.name, tuple(sorted(victims, key=_importance)), violations)


def pick_node(candidates: Sequence[Victims]) -> Victims:
    """`pickOneNodeForPreemption`: fewest budget violations, then the lowest highest-victim
    priority, the smallest sum of priorities, the fewest victims, the latest start of the highest
    priority victims; then the first in the given order. A node without victims wins at once."""
    for candidate in candidates:
        if not candidate.pods:
            return candidate

    def key(c: Victims) -> tuple[int, int, int, int, str]:
        highest = max(p.priority for p in c.pods)
        earliest = min(p.start or _LATEST for p in c.pods if p.priority == highest)
        # Offset by 2^31 as kube-scheduler does, so negative priorities still add up.
        total = sum(p.priority + 2**31 for p in c.pods)
        return (c.pdb_violations, highest, total, len(c.pods), _inverted(earliest))

    return min(candidates, key=key)


def _inverted(stamp: str) -> str:
    """A key under which later stamps sort first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in stamp)


def eligible(
    spec: Mapping[str, Any],
    priority: int,
    nominated_node: str,
    nominated_failure: Failure | None,
    terminating_priorities: Sequence[int],
) -> str:
    """`PodEligibleToPreemptOthers`: "" when the pod may preempt, else why not. A pod nominated to a
    node where a lower-priority victim is still terminating waits for it rather than preempting
    again (unless that node cannot take it at all any more)."""
    if spec.get("preemptionPolicy") == "Never":
        return messages.NOT_ELIGIBLE
    unresolvable = nominated_failure is not None and not nominated_failure.resolvable
    if nominated_node and not unresolvable and any(p < priority for p in terminating_priorities):
        return messages.TERMINATING_ON_NOMINATED
    return ""


def preempt(
    spec: Mapping[str, Any],
    requests: Mapping[str, int],
    priority: int,
    nodes: Sequence[NodeInfo],
    failures: Mapping[str, Failure],
    pods_on: Mapping[str, Sequence[PodOnNode]],
    budgets: Sequence[Budget] = (),
) -> tuple[Victims | None, dict[str, Failure]]:
    """The chosen node and victims, or None and each node's reason (the `preemption:` message's
    counts). Only nodes that failed on something removing pods can cure are tried."""
    statuses: dict[str, Failure] = {}
    candidates: list[Victims] = []
    index = Budgets(budgets)
    for node in sorted(nodes, key=lambda n: n.name):
        failure = failures.get(node.name)
        if failure is None:
            continue
        if not failure.resolvable:
            statuses[node.name] = Failure((messages.NOT_HELPFUL,), resolvable=False)
            continue
        outcome = select_victims(spec, requests, priority, node, pods_on.get(node.name, ()), index)
        if isinstance(outcome, Victims):
            candidates.append(outcome)
        else:
            statuses[node.name] = outcome
    if candidates:
        return pick_node(candidates), {}
    return None, statuses
