"""The scheduler: binds pods without a node, of `default-scheduler` and of the gang schedulers whose
PodGroup CRD is served (a group at a time, `kubesim.scheduling.gang`), with the pure plugins of
`kubesim.scheduling`; others stay Pending. Per-node usage is kept incrementally from pod and node
changes, so a decision reads no pod list. A pod that fits nowhere gets `PodScheduled=False` and a
`FailedScheduling` event, may preempt (`kubesim.scheduling.preemption`: victims marked, deleted,
the node nominated), and waits in the unschedulable set until a change could make it fit (a pod
freed its node, a node came or changed): it then retries after its back-off (1 s doubling to
10 s), as kube-scheduler's queue does; pods unschedulable for 5 minutes are retried anyway. No
polling. The default cluster binds its pods at admission (`kubesim.cluster`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.clock import Clock, Timer
from kubesim.controllers import get_or_none, resource_type
from kubesim.scheduling import filters, gang, messages, preemption, score
from kubesim.scheduling import resources as res
from kubesim.scheduling.filters import Failure, NodeInfo
from kubesim.scheduling.gang import (
    COSCHEDULING_SCHEDULER_NAME,
    VOLCANO_SCHEDULER_NAME,
    GroupKey,
    group_of,
)
from kubesim.scheduling.preemption import Budget, PodOnNode, Victims
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.controllers.podevents import PodEvents
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

PodKey = tuple[str, str]
SCHEDULER_NAME = "default-scheduler"
POD_GROUPS: dict[str, tuple[str, str]] = {
    gang.COSCHEDULING: ("scheduling.x-k8s.io", "v1alpha1"),
    gang.VOLCANO: ("scheduling.volcano.sh", "v1beta1"),
}
INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0
FLUSH_INTERVAL_SECONDS = 30.0
MAX_UNSCHEDULABLE_SECONDS = 300.0
TERMINAL = ("Succeeded", "Failed")
PREEMPTION_REASON = "PreemptionByScheduler"


def backoff_seconds(attempts: int) -> float:
    """kube-scheduler's per-pod back-off after `attempts` failed attempts (0 before the first)."""
    if attempts <= 0:
        return 0.0
    return float(min(INITIAL_BACKOFF_SECONDS * 2 ** (attempts - 1), MAX_BACKOFF_SECONDS))


def _pending(pod: dict[str, Any]) -> bool:
    """Unbound, not terminal, not being deleted."""
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and (pod.get("status") or {}).get("phase") not in TERMINAL
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def wants_scheduling(pod: dict[str, Any]) -> bool:
    """Unbound, not terminal, not being deleted, and this scheduler's."""
    spec = pod.get("spec") or {}
    return (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME and _pending(pod)


def _priority(spec: Mapping[str, Any]) -> int:
    return int(spec.get("priority") or 0)


def _preempting(pod: Mapping[str, Any]) -> bool:
    """Being deleted by a preemption (`podTerminatingByPreemption`)."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == PREEMPTION_REASON
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class _Bound:
    __slots__ = ("node", "priority", "requests", "scored")

    def __init__(
        self, node: str, requests: res.Resources, scored: res.Resources, priority: int
    ) -> None:
        self.node = node
        self.requests = requests
        self.scored = scored
        self.priority = priority


class Scheduler:
    name = "scheduler"

    def __init__(
        self, cluster: Cluster, settings: SimSettings, clock: Clock, events: PodEvents
    ) -> None:
        self._cluster = cluster
        self._clock = clock
        self._events = events
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._nodes_rt = resource_type(cluster, "v1", "Node")
        self._pdbs_rt = resource_type(cluster, "policy/v1", "PodDisruptionBudget")
        self._unlimited = {s.name for s in settings.node_shapes() if s.unlimited}
        self._queue: WorkQueue[PodKey] = WorkQueue(clock)
        self._nodes: dict[str, NodeInfo] = {}
        self._bound: dict[PodKey, _Bound] = {}
        self._on_node: dict[str, set[PodKey]] = {}
        """The counted pods of each limited node (preemption's candidates)."""
        self._nominated: dict[PodKey, tuple[str, int, res.Resources]] = {}
        """Unbound pods with a nominatedNodeName: (node, priority, requests)."""
        self._groups: dict[GroupKey, set[PodKey]] = {}
        """Every existing pod of each gang, bound or not."""
        self._attempts: dict[PodKey, tuple[int, float]] = {}
        """Failed attempts of a pod and when the last one was (its back-off)."""
        self.unschedulable: dict[PodKey, float] = {}
        """Pods waiting for a change that could make them fit, and since when."""
        self._flush: Timer | None = None
        for node in cluster.list(self._nodes_rt, None, copy_objects=False)["items"]:
            self._node_changed(node, None)
        for pod in cluster.list(self._pods_rt, None, copy_objects=False)["items"]:
            self._pod_changed("ADDED", pod)

    async def run(self) -> None:
        # One pod per turn of the loop, as kube-scheduler's cycles run beside the other
        # controllers: a preemption's victims reach the disruption controller, and its budgets'
        # allowance the next preemption, before the next pod is tried.
        await process(self.name, self._queue, self._sync, batch=1)

    def usage(self, node: str) -> NodeInfo | None:
        """What the scheduler counts on `node` (tests, `kubectl describe node` cross-checks)."""
        return self._nodes.get(node)

    # --- learning about changes (synchronous, cheap) ------------------------------------------
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and rt == self._pods_rt:
            self._pod_changed(event, obj)
            if event == "MODIFIED" and old is not None and old.get("spec") != obj.get("spec"):
                # A spec change (tolerations, a scheduling gate's removal...) may make it fit.
                self._retry(str(obj["metadata"]["namespace"]), str(obj["metadata"]["name"]))
        elif rt.plural == "nodes" and rt == self._nodes_rt:
            if event == "DELETED":
                self._nodes.pop(str(obj["metadata"]["name"]), None)
            else:
                self._node_changed(obj, old)
        elif rt.plural == "podgroups" and self._groups:
            flavor = next((f for f, (g, _) in POD_GROUPS.items() if g == rt.group), None)
            if flavor is not None and (old is None or old.get("spec") != obj.get("spec")):
                meta = obj["metadata"]
                self._retry_group((flavor, str(meta.get("namespace", "")), str(meta["name"])))
        elif rt.plural == "customresourcedefinitions" and self._groups:
            # A gang scheduler's PodGroup kind came (or went): its pods are worth another look.
            for group in self._groups:
                self._retry_group(group, queue_all=True)

    def _pod_changed(self, event: EventType, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        counted = (
            event != "DELETED"
            and bool(node)
            and (pod.get("status") or {}).get("phase") not in TERMINAL
        )
        if counted and node not in self._unlimited and key not in self._bound:
            bound = _Bound(
                str(node),
                res.pod_requests(spec),
                res.pod_requests(spec, nonzero=True),
                _priority(spec),
            )
            self._bound[key] = bound
            self._on_node.setdefault(bound.node, set()).add(key)
            self._account(bound, +1)
        elif not counted and key in self._bound:
            gone = self._bound.pop(key)
            self._on_node.get(gone.node, set()).discard(key)
            self._account(gone, -1)
            self._retry_unschedulable()
        if key in self._nominated or (
            not node and (pod.get("status") or {}).get("nominatedNodeName")
        ):
            self._note_nomination(key, pod, event)
        if spec.get("schedulerName") not in (None, SCHEDULER_NAME):
            self._gang_pod_changed(event, key, pod)
        elif event == "DELETED" or not wants_scheduling(pod):
            if (
                key in self._attempts
            ):  # the common case, a bound pod, costs no more than this lookup
                self._forget(key)
        elif event == "ADDED":
            self._queue.add(key)

    def _note_nomination(self, key: PodKey, pod: dict[str, Any], event: EventType) -> None:
        self._nominated.pop(key, None)
        spec = pod.get("spec") or {}
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if event != "DELETED" and nominated and _pending(pod):
            self._nominated[key] = (str(nominated), _priority(spec), res.pod_requests(spec))

    def _gang_pod_changed(self, event: EventType, key: PodKey, pod: dict[str, Any]) -> None:
        group = group_of(pod)
        if group is None:
            if event == "ADDED" and _pending(pod):
                self._queue.add(key)  # a gang scheduler's pod without a group goes alone
            elif event == "DELETED" or not _pending(pod):
                self._forget(key)
            return
        members = self._groups.setdefault(group, set())
        if event == "DELETED":
            members.discard(key)
            if not members:
                del self._groups[group]
            self._forget(key)
            return
        if not _pending(pod):
            self._forget(key)
        if key not in members:
            members.add(key)
            # A new member may complete the group: its siblings try again with it.
            self._retry_group(group)
            if _pending(pod):
                self._queue.add(key)

    def _account(self, bound: _Bound, sign: int) -> None:
        info = self._nodes.get(bound.node)
        if info is None:
            return
        info.pods += sign
        for name, value in bound.requests.items():
            info.requested[name] = info.requested.get(name, 0) + sign * value
        for name, value in bound.scored.items():
            info.scored[name] = info.scored.get(name, 0) + sign * value

    def _node_changed(self, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str(node["metadata"]["name"])
        info = filters.node_info(node, unlimited=name in self._unlimited)
        known = self._nodes.get(name)
        self._nodes[name] = info
        if known is not None:
            info.requested, info.scored, info.pods = known.requested, known.scored, known.pods
        else:
            for bound in self._bound.values():
                if bound.node == name:
                    self._account(bound, +1)
        if known is None or _could_help(known, info):
            self._retry_unschedulable()

    def _forget(self, key: PodKey) -> None:
        self.unschedulable.pop(key, None)
        self._attempts.pop(key, None)
        self._queue.cancel(key)

    def _retry_unschedulable(self) -> None:
        """Every unschedulable pod back to the queue, each once its back-off has passed."""
        if not self.unschedulable:
            return
        now = self._clock.now()
        waiting, self.unschedulable = self.unschedulable, {}
        for key in waiting:
            attempts, last = self._attempts.get(key, (0, now))
            self._queue.add_after(key, last + backoff_seconds(attempts) - now)

    def _retry(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        if self.unschedulable.pop(key, None) is not None:
            attempts, last = self._attempts.get(key, (0, self._clock.now()))
            self._queue.add_after(key, last + backoff_seconds(attempts) - self._clock.now())

    def _retry_group(self, group: GroupKey, *, queue_all: bool = False) -> None:
        for key in self._groups.get(group, ()):
            if key in self.unschedulable:
                self._retry(*key)
            elif queue_all:
                self._queue.add(key)

    def _flush_leftovers(self) -> None:
        """Pods unschedulable for longer than 5 minutes are tried again
        (flushUnschedulablePodsLeftover)."""
        self._flush = None
        now = self._clock.now()
        for key, since in list(self.unschedulable.items()):
            if now - since >= MAX_UNSCHEDULABLE_SECONDS:
                del self.unschedulable[key]
                self._queue.add(key)
        self._arm_flush()

    def _arm_flush(self) -> None:
        if self.unschedulable and self._flush is None:
            self._flush = self._clock.call_later(FLUSH_INTERVAL_SECONDS, self._flush_leftovers)

    # --- what a pod sees of a node -------------------------------------------------------------
    def _view(self, info: NodeInfo, key: PodKey, priority: int) -> NodeInfo:
        """`info` with the requests of the pods nominated to it that a pod of `priority` must leave
        room for (their priority is not lower), as RunFilterPluginsWithNominatedPods adds them."""
        if not self._nominated:
            return info
        extra = [
            requests
            for other, (node, their, requests) in self._nominated.items()
            if node == info.name and other != key and their >= priority
        ]
        if not extra:
            return info
        requested = dict(info.requested)
        for requests in extra:
            res.add(requested, requests)
        return dataclasses.replace(info, requested=requested, pods=info.pods + len(extra))

    # --- one scheduling attempt ----------------------------------------------------------------
    def _sync(self, key: PodKey) -> None:
        if key in self.unschedulable:
            return  # a sibling's gang attempt already decided it; it waits for a change
        pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False)
        if pod is None or not _pending(pod):
            self._forget(key)
            return
        spec = pod.get("spec") or {}
        name = spec.get("schedulerName") or SCHEDULER_NAME
        if name != SCHEDULER_NAME:
            group = group_of(pod)
            flavor = gang.VOLCANO if name == VOLCANO_SCHEDULER_NAME else gang.COSCHEDULING
            if name not in (COSCHEDULING_SCHEDULER_NAME, VOLCANO_SCHEDULER_NAME) or (
                self._group_rt(flavor) is None
            ):
                self._forget(key)  # no such scheduler in this cluster: it stays Pending
                return
            if group is not None:
                self._sync_group(group)
                return
        requests = res.pod_requests(spec)
        priority = _priority(spec)
        failures: dict[str, Failure] = {}
        feasible: list[NodeInfo] = []
        for info in self._nodes.values():
            view = self._view(info, key, priority)
            failure = filters.filter_node(spec, requests, view)
            if failure is None:
                feasible.append(view)
            else:
                failures[info.name] = failure
        if feasible:
            self._bind(key, score.pick(res.pod_requests(spec, nonzero=True), feasible).name)
            return
        post, nominate = self._post_filter(pod, key, requests, priority, failures)
        message = unschedulable_message(pod, len(self._nodes), failures, post)
        self._unschedulable(pod, key, message, nominate)

    def _bind(self, key: PodKey, node: str) -> bool:
        try:
            written = self._cluster.bind(self._pods_rt, key[0], key[1], node)
        except errors.StatusError as err:
            if err.code in (404, 409):  # gone, or bound by someone else meanwhile
                self._forget(key)
                return False
            raise
        self._forget(key)
        self._events.scheduled(written.stored)
        return True

    def _unschedulable(
        self, pod: dict[str, Any], key: PodKey, message: str, nominate: str | None = None
    ) -> None:
        """PodScheduled=False and FailedScheduling; `nominate` sets status.nominatedNodeName ("":
        clears it; None: leaves it)."""
        now = self._clock.now()
        attempts = self._attempts.get(key, (0, now))[0] + 1
        self._attempts[key] = (attempts, now)
        self.unschedulable[key] = now
        self._arm_flush()
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": self._clock.timestamp(),
            "reason": "Unschedulable",
            "message": message,
        }
        status = dict(pod.get("status") or {})
        conditions = list(status.get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        same = ("status", "reason", "message")
        nomination_changes = nominate is not None and (status.get("nominatedNodeName") or "") != (
            nominate
        )
        if current is None or any(current.get(k) != condition[k] for k in same):
            conditions = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
            status["conditions"] = conditions
        elif not nomination_changes:
            self._events.failed_scheduling(pod, message)
            return
        status.setdefault("phase", "Pending")
        if nomination_changes:
            if nominate:
                status["nominatedNodeName"] = nominate
            else:
                status.pop("nominatedNodeName", None)
        body = {**pod, "metadata": dict(pod["metadata"]), "status": status}
        self._cluster.update(self._pods_rt, key[0], key[1], body, subresource="status")
        self._events.failed_scheduling(pod, message)

    # --- preemption ----------------------------------------------------------------------------
    def _post_filter(
        self,
        pod: dict[str, Any],
        key: PodKey,
        requests: res.Resources,
        priority: int,
        failures: dict[str, Failure],
    ) -> tuple[str, str | None]:
        """DefaultPreemption: (the message's `preemption:` part, the node to nominate: "" clears,
        None leaves as is). Victims found are marked and deleted here."""
        spec = pod.get("spec") or {}
        nominated = str((pod.get("status") or {}).get("nominatedNodeName") or "")
        terminating = [
            self._bound[k].priority
            for k in self._on_node.get(nominated, ())
            if (other := get_or_none(self._cluster, self._pods_rt, *k, copy=False)) is not None
            and _preempting(other)
        ]
        why_not = preemption.eligible(
            spec, priority, nominated, failures.get(nominated), terminating
        )
        if why_not:
            return why_not, None
        pods_on = {
            name: [self._on_node_pod(k) for k in self._on_node.get(name, ())]
            for name, failure in failures.items()
            if failure.resolvable
        }
        budgets = self._budgets() if any(pods_on.values()) else []
        nodes = [self._view(self._nodes[n], key, priority) for n in failures if n in self._nodes]
        chosen, statuses = preemption.preempt(
            spec, requests, priority, nodes, failures, pods_on, budgets
        )
        if chosen is None:
            return messages.preemption_failed(len(self._nodes), statuses), ""
        self._evict_victims(pod, chosen)
        return "", chosen.node

    def _on_node_pod(self, key: PodKey) -> PodOnNode:
        bound = self._bound[key]
        pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False) or {}
        return PodOnNode(
            namespace=key[0],
            name=key[1],
            priority=bound.priority,
            requests=bound.requests,
            labels=(pod.get("metadata") or {}).get("labels") or {},
            start=str((pod.get("status") or {}).get("startTime") or ""),
        )

    def _budgets(self) -> list[Budget]:
        items = self._cluster.list(self._pdbs_rt, None, copy_objects=False)["items"]
        return [
            Budget(
                namespace=str(b["metadata"].get("namespace", "")),
                selector=(b.get("spec") or {}).get("selector"),
                disruptions_allowed=int((b.get("status") or {}).get("disruptionsAllowed") or 0),
                disrupted=frozenset((b.get("status") or {}).get("disruptedPods") or {}),
            )
            for b in items
        ]

    def _evict_victims(self, preemptor: dict[str, Any], chosen: Victims) -> None:
        """`prepareCandidate`: each victim gets DisruptionTarget, then its graceful delete, and a
        Preempted event; lower-priority pods nominated to the node lose that nomination."""
        uid = preemptor["metadata"].get("uid", "")
        for victim in chosen.pods:
            pod = get_or_none(self._cluster, self._pods_rt, victim.namespace, victim.name)
            if pod is None:
                continue
            if not pod["metadata"].get("deletionTimestamp"):
                status = pod.setdefault("status", {})
                status["conditions"] = [
                    *(
                        c
                        for c in status.get("conditions") or []
                        if c.get("type") != "DisruptionTarget"
                    ),
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "lastTransitionTime": self._clock.timestamp(),
                        "reason": PREEMPTION_REASON,
                        "message": f"{SCHEDULER_NAME}: preempting to accommodate a higher "
                        "priority pod",
                    },
                ]
                try:
                    self._cluster.update(
                        self._pods_rt, victim.namespace, victim.name, pod, subresource="status"
                    )
                    self._cluster.delete(self._pods_rt, victim.namespace, victim.name)
                except errors.StatusError as err:
                    if err.code not in (404, 409):
                        raise
                    continue
            message = f"Preempted by pod {uid} on node {chosen.node}"
            self._events.scheduler.event(pod, "Normal", "Preempted", message, action="Preempting")
        priority = _priority(preemptor.get("spec") or {})
        me = (preemptor["metadata"]["namespace"], preemptor["metadata"]["name"])
        for other, (node, theirs, _) in list(self._nominated.items()):
            if node == chosen.node and theirs < priority and other != me:
                self._clear_nomination(other)

    def _clear_nomination(self, key: PodKey) -> None:
        pod = get_or_none(self._cluster, self._pods_rt, *key)
        if pod is None:
            return
        pod.setdefault("status", {}).pop("nominatedNodeName", None)
        try:
            self._cluster.update(self._pods_rt, key[0], key[1], pod, subresource="status")
        except errors.StatusError as err:
            if err.code not in (404, 409):
                raise

    # --- gangs ---------------------------------------------------------------------------------
    def _group_rt(self, flavor: str) -> ResourceType | None:
        group, version = POD_GROUPS[flavor]
        return self._cluster.registry.by_plural(group, version, "podgroups")

    def _sync_group(self, group: GroupKey) -> None:
        """One attempt for a whole gang: its pending pods are bound only if enough of them fit at
        once to make minMember bound; else none is, and all wait for a change (or the timeout)."""
        flavor, namespace, name = group
        rt = self._group_rt(flavor)
        pods = [
            p
            for k in sorted(self._groups.get(group, ()))
            if (p := get_or_none(self._cluster, self._pods_rt, *k, copy=False)) is not None
        ]
        pending = sorted(
            (p for p in pods if _pending(p)),
            key=lambda p: (
                -_priority(p["spec"]),
                p["metadata"].get("creationTimestamp", ""),
                p["metadata"]["name"],
            ),
        )
        if not pending:
            return
        total = len(self._nodes)
        pg = None if rt is None else get_or_none(self._cluster, rt, namespace, name, copy=False)
        if pg is None:
            for pod in pending:
                self._unschedulable_member(pod, "PodGroup not found")
            return
        pg_spec = pg.get("spec") or {}
        min_member = int(pg_spec.get("minMember") or 1)
        if len(pods) < min_member:
            for pod in pending:
                why = gang.not_enough_siblings(
                    flavor, pod["metadata"]["name"], len(pods), min_member
                )
                self._unschedulable_member(pod, f"0/{total} nodes are available: {why}.")
            return
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL]
        needed = min_member - (len(live) - len(pending))
        if needed > 0 and pg_spec.get("minResources"):
            gap = gang.resource_gap(
                res.resource_list(pg_spec.get("minResources")),
                min_member,
                list(self._nodes.values()),
            )
            if gap:
                why = "resource gap: " + ", ".join(f"{k}={v}" for k, v in sorted(gap.items()))
                for pod in pending:
                    self._unschedulable_member(pod, f"0/{total} nodes are available: {why}.")
                return
        if flavor == gang.VOLCANO:
            self._admit_volcano_group(rt, pg)
        members = [
            gang.Member(
                (p["metadata"]["namespace"], p["metadata"]["name"]),
                p["spec"],
                res.pod_requests(p["spec"]),
                res.pod_requests(p["spec"], nonzero=True),
            )
            for p in pending
        ]
        nodes = list(self._nodes.values())
        placed, failed = gang.place(members, nodes)
        if len(placed) >= needed:
            for key, node in placed.items():
                self._bind(key, node)  # type: ignore[arg-type]
            for pod in pending:
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if key in failed:
                    self._unschedulable_member(pod, messages.fit_error(total, failed[key]))
            return
        timeout = int(pg_spec.get("scheduleTimeoutSeconds") or 0) or (
            gang.DEFAULT_SCHEDULE_TIMEOUT_SECONDS
        )
        for pod in pending:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if flavor == gang.VOLCANO:
                message = gang.gang_unschedulable(len(pending), len(failed), min_member)
            elif key in failed:
                message = messages.fit_error(total, failed[key])
            else:
                message = gang.permit_timeout(timeout)
            self._unschedulable_member(pod, message)
        first = (pending[0]["metadata"]["namespace"], pending[0]["metadata"]["name"])
        self._clock.call_later(timeout, lambda: self._retry(*first))

    def _unschedulable_member(self, pod: dict[str, Any], message: str) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._queue.cancel(key)
        self._unschedulable(pod, key, message)

    def _admit_volcano_group(self, rt: ResourceType | None, pg: dict[str, Any]) -> None:
        """Volcano's enqueue action: a Pending group whose minResources fit goes Inqueue."""
        status = pg.get("status") or {}
        if rt is None or status.get("phase") not in (None, "", "Pending"):
            return
        body = {**pg, "metadata": dict(pg["metadata"]), "status": {**status, "phase": "Inqueue"}}
        try:
            self._cluster.update(
                rt, pg["metadata"]["namespace"], pg["metadata"]["name"], body, subresource="status"
            )
        except errors.StatusError as err:  # gone, changed meanwhile, or a CRD without status
            log.debug("kubesim: PodGroup %s not set Inqueue: %s", pg["metadata"]["name"], err)


def unschedulable_message(
    pod: dict[str, Any], total_nodes: int, failures: dict[str, Failure], post: str | None = None
) -> str:
    """The FailedScheduling message: the FitError, then what preemption found (`post`; when None,
    what it finds with nobody to remove)."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    if post is None:
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            post = messages.NOT_ELIGIBLE
        else:
            post = messages.preemption_message(total_nodes, failures)
    return messages.fit_error(total_nodes, failures, post)


def _could_help(before: NodeInfo, after: NodeInfo) -> bool:
    """A node change that could let an unschedulable pod fit (kube-scheduler's NodeUpdate hints)."""
    return (
        (before.unschedulable and not after.unschedulable)
        or before.allocatable != after.allocatable
        or list(before.taints) != list(after.taints)
        or before.labels != after.labels
    )
