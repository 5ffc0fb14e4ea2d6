"""The taint eviction controller (`pkg/controller/tainteviction/taint_eviction.go`): a pod on a node
with NoExecute taints it does not tolerate is deleted at once; one that tolerates them for a while
(`tolerationSeconds`, 300 s for not-ready and unreachable by DefaultTolerationSeconds) when the
shortest runs out, counted from when this controller saw it. Before the delete: a
`TaintManagerEviction` event and `DisruptionTarget=True` (DeletionByTaintManager). A taint removed
in time cancels the deletion. Only nodes with a NoExecute taint are tracked: a pod change elsewhere
costs one dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.clock import Clock
from kubesim.controllers import get_or_none, nodehealth, resource_type
from kubesim.controllers.events import EventRecorder
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

PodKey = tuple[str, str]


class TaintEvictionController:
    name = "taint-eviction-controller"

    def __init__(self, cluster: Cluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._nodes_rt = resource_type(cluster, "v1", "Node")
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[PodKey] = WorkQueue(clock)
        self._tainted: dict[str, list[Mapping[str, Any]]] = {}
        """Nodes with NoExecute taints: those taints."""
        self._scheduled: dict[PodKey, float] = {}
        """Pods due for deletion, and when."""
        self.events = EventRecorder(cluster, clock, self.name)
        for node in cluster.list(self._nodes_rt, None, copy_objects=False)["items"]:
            self._node_changed(node)

    async def run(self) -> None:
        await process(self.name, self._queue, self._sync)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and rt == self._pods_rt:
            node = (obj.get("spec") or {}).get("nodeName")
            if not self._tainted or node not in self._tainted:
                return  # the common case
            meta = obj["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            if event == "DELETED":
                self._cancel(key, None)
            else:
                self._pod_on_tainted_node(key, obj, self._tainted[str(node)])
        elif rt.plural == "nodes" and rt == self._nodes_rt:
            if event == "DELETED":
                self._tainted.pop(str(obj["metadata"]["name"]), None)
            else:
                self._node_changed(obj)

    def _node_changed(self, node: dict[str, Any]) -> None:
        name = str(node["metadata"]["name"])
        taints = nodehealth.no_execute_taints((node.get("spec") or {}).get("taints") or ())
        before = self._tainted.get(name, [])
        if taints == before:
            return
        if taints:
            self._tainted[name] = taints
        else:
            self._tainted.pop(name, None)
        selected = self._cluster.list(
            self._pods_rt, None, field_selector=f"spec.nodeName={name}", copy_objects=False
        )["items"]
        for pod in selected:
            key = (str(pod["metadata"]["namespace"]), str(pod["metadata"]["name"]))
            self._pod_on_tainted_node(key, pod, taints)

    def _pod_on_tainted_node(
        self, key: PodKey, pod: dict[str, Any], taints: Sequence[Mapping[str, Any]]
    ) -> None:
        """processPodOnNode: schedules, keeps or cancels the pod's deletion."""
        if pod["metadata"].get("deletionTimestamp"):
            self._scheduled.pop(key, None)
            self._queue.cancel(key)
            return
        tolerations = (pod.get("spec") or {}).get("tolerations") or ()
        delay = nodehealth.eviction_delay(tolerations, taints)
        if delay is None:
            self._cancel(key, pod)
        elif key not in self._scheduled:  # a deletion already due keeps its time
            self._scheduled[key] = self._clock.now() + delay
            self._queue.add_after(key, delay)

    def _cancel(self, key: PodKey, pod: dict[str, Any] | None) -> None:
        if self._scheduled.pop(key, None) is None:
            return
        self._queue.cancel(key)
        if pod is not None:
            ns, name = key
            self.events.event(
                pod, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {ns}/{name}"
            )

    def _sync(self, key: PodKey) -> None:
        due = self._scheduled.get(key)
        if due is None:
            return
        if self._clock.now() < due:
            self._queue.add_after(key, due - self._clock.now())
            return
        del self._scheduled[key]
        pod = get_or_none(self._cluster, self._pods_rt, *key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        ns, name = key
        self.events.event(
            pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {ns}/{name}"
        )
        condition = nodehealth.disruption_condition(
            nodehealth.TAINT_MANAGER_REASON,
            nodehealth.TAINT_MANAGER_MESSAGE,
            self._clock.timestamp(),
        )
        status = nodehealth.with_condition(pod.get("status") or {}, condition)
        try:
            self._cluster.update(
                self._pods_rt, ns, name, {**pod, "status": status}, subresource="status"
            )
            self._cluster.delete(self._pods_rt, ns, name)
        except errors.StatusError as err:
            if err.code != 404:
                raise
