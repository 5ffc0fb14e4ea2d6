"""The default scheduler: binds pods of `schedulerName: default-scheduler` without a node, using
the pure plugins of `kubesim.scheduling`; others (a set nodeName, another scheduler) are left alone.

Per-node usage is kept incrementally from pod and node changes (a pod counts from its binding until
it is terminal or gone), so a decision reads no pod list. A pod that fits nowhere gets
`PodScheduled=False` (reason Unschedulable) and a `FailedScheduling` event, and waits in the
unschedulable set until a change could make it fit (a pod freed its node, a node came, was
uncordoned or changed): it then retries after its back-off (1 s doubling to 10 s), as
kube-scheduler's queue does; pods unschedulable for 5 minutes are retried anyway. No polling.

The default cluster binds its pods at admission (`kubesim.cluster`), so this controller only sees
the few that fail a filter there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.clock import Clock, Timer
from kubesim.controllers import get_or_none, resource_type
from kubesim.scheduling import filters, messages, score
from kubesim.scheduling import resources as res
from kubesim.scheduling.filters import Failure, NodeInfo
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.controllers.podevents import PodEvents
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

PodKey = tuple[str, str]
SCHEDULER_NAME = "default-scheduler"
INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0
FLUSH_INTERVAL_SECONDS = 30.0
MAX_UNSCHEDULABLE_SECONDS = 300.0
TERMINAL = ("Succeeded", "Failed")


def backoff_seconds(attempts: int) -> float:
    """kube-scheduler's per-pod back-off after `attempts` failed attempts (0 before the first)."""
    if attempts <= 0:
        return 0.0
    return float(min(INITIAL_BACKOFF_SECONDS * 2 ** (attempts - 1), MAX_BACKOFF_SECONDS))


def wants_scheduling(pod: dict[str, Any]) -> bool:
    """Unbound, not terminal, not being deleted, and this scheduler's."""
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
        and (pod.get("status") or {}).get("phase") not in TERMINAL
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    )


class _Bound:
    __slots__ = ("node", "requests", "scored")

    def __init__(self, node: str, requests: res.Resources, scored: res.Resources) -> None:
        self.node = node
        self.requests = requests
        self.scored = scored


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
        self._unlimited = {s.name for s in settings.node_shapes() if s.unlimited}
        self._queue: WorkQueue[PodKey] = WorkQueue(clock)
        self._nodes: dict[str, NodeInfo] = {}
        self._bound: dict[PodKey, _Bound] = {}
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
        await process(self.name, self._queue, self._sync)

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
            bound = _Bound(str(node), res.pod_requests(spec), res.pod_requests(spec, nonzero=True))
            self._bound[key] = bound
            self._account(bound, +1)
        elif not counted and key in self._bound:
            self._account(self._bound.pop(key), -1)
            self._retry_unschedulable()
        if event == "DELETED" or not wants_scheduling(pod):
            if (
                key in self._attempts
            ):  # the common case, a bound pod, costs no more than this lookup
                self._forget(key)
        elif event == "ADDED":
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

    # --- one scheduling attempt ----------------------------------------------------------------
    def _sync(self, key: PodKey) -> None:
        pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False)
        if pod is None or not wants_scheduling(pod):
            self._forget(key)
            return
        spec = pod.get("spec") or {}
        requests = res.pod_requests(spec)
        failures: dict[str, Failure] = {}
        feasible: list[NodeInfo] = []
        for info in self._nodes.values():
            failure = filters.filter_node(spec, requests, info)
            if failure is None:
                feasible.append(info)
            else:
                failures[info.name] = failure
        if feasible:
            self._bind(pod, key, score.pick(res.pod_requests(spec, nonzero=True), feasible).name)
        else:
            self._unschedulable(pod, key, failures)

    def _bind(self, pod: dict[str, Any], key: PodKey, node: str) -> None:
        try:
            written = self._cluster.bind(self._pods_rt, key[0], key[1], node)
        except errors.StatusError as err:
            if err.code in (404, 409):  # gone, or bound by someone else meanwhile
                self._forget(key)
                return
            raise
        self._forget(key)
        self._events.scheduled(written.stored)

    def _unschedulable(
        self, pod: dict[str, Any], key: PodKey, failures: dict[str, Failure]
    ) -> None:
        now = self._clock.now()
        attempts = self._attempts.get(key, (0, now))[0] + 1
        self._attempts[key] = (attempts, now)
        self.unschedulable[key] = now
        self._arm_flush()
        message = unschedulable_message(pod, len(self._nodes), failures)
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
        if current is None or any(current.get(k) != condition[k] for k in same):
            conditions = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
            status["conditions"] = conditions
            status.setdefault("phase", "Pending")
            body = {**pod, "metadata": dict(pod["metadata"]), "status": status}
            self._cluster.update(self._pods_rt, key[0], key[1], body, subresource="status")
        self._events.failed_scheduling(pod, message)


def unschedulable_message(
    pod: dict[str, Any], total_nodes: int, failures: dict[str, Failure]
) -> str:
    """The FailedScheduling message: the FitError, then what preemption found."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
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
