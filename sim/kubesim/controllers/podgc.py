"""The pod garbage collector (`pkg/controller/podgc/gc_controller.go`): pods bound to a node that
no longer exists (deleted, or never there) are marked Failed with `DisruptionTarget`
(DeletionByPodGC) and force-deleted once the node has been missing for the quarantine (40 s);
terminating pods on a node that is not Ready and tainted `node.kubernetes.io/out-of-service` are
marked Failed and force-deleted; past `terminated_pod_gc_threshold` finished pods, the oldest go
(evicted ones first). kube-controller-manager scans every 20 s; kubesim acts on the change that
makes a pod collectable, so a change elsewhere costs a dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from kubesim import errors
from kubesim.clock import Clock
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none, nodehealth, resource_type
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

QUARANTINE_SECONDS: Final = 40.0
"""How long a pod's node must be missing before its pods are collected (`quarantineTime`)."""
TERMINAL: Final = ("Succeeded", "Failed")
TERMINATED: Final = ""
"""The queue key of the sweep over finished pods (no node has an empty name)."""
PodKey = tuple[str, str]


def _finished_order(pod: Mapping[str, Any]) -> tuple[bool, str, str]:
    """`byEvictionAndCreationTimestamp`: evicted pods first, then the oldest, then by name."""
    meta = pod.get("metadata") or {}
    evicted = (pod.get("status") or {}).get("reason") == "Evicted"
    return (not evicted, str(meta.get("creationTimestamp", "")), str(meta.get("name", "")))


class PodGarbageCollector:
    name = "pod-garbage-collector"

    def __init__(self, cluster: Cluster, clock: Clock, terminated_threshold: int) -> None:
        self._cluster = cluster
        self._clock = clock
        self._threshold = terminated_threshold
        self._nodes_rt = resource_type(cluster, "v1", "Node")
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[str] = WorkQueue(clock)
        self._nodes: dict[str, bool] = {}
        """Every node, and whether it is out of service (not Ready and tainted so)."""
        self._finished: dict[PodKey, tuple[bool, str, str]] = {}
        """Pods in a terminal phase (only counted with a threshold), and their order."""
        for node in cluster.list(self._nodes_rt, None, copy_objects=False)["items"]:
            self._node_changed("ADDED", node)
        for pod in cluster.list(self._pods_rt, None, copy_objects=False)["items"]:
            self._pod_changed("ADDED", pod)

    async def run(self) -> None:
        await process(self.name, self._queue, self._sync)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and rt == self._pods_rt:
            self._pod_changed(event, obj)
        elif rt.plural == "nodes" and rt == self._nodes_rt:
            self._node_changed(event, obj)

    def _node_changed(self, event: EventType, node: dict[str, Any]) -> None:
        name = str(node["metadata"]["name"])
        if event == "DELETED":
            self._nodes.pop(name, None)
            self._queue.add_after(name, QUARANTINE_SECONDS)
            return
        out = nodehealth.ready_status(node) != "True" and any(
            t.get("key") == nodehealth.OUT_OF_SERVICE
            for t in (node.get("spec") or {}).get("taints") or ()
        )
        if out and not self._nodes.get(name):
            self._queue.add(name)
        self._nodes[name] = out

    def _pod_changed(self, event: EventType, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and event != "DELETED":
            out = self._nodes.get(node)
            if out is None:
                self._queue.add_after(str(node), QUARANTINE_SECONDS)  # the node may yet come
            elif out and pod["metadata"].get("deletionTimestamp"):
                self._queue.add(str(node))
        if self._threshold <= 0:
            return
        meta = pod["metadata"]
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event != "DELETED" and (pod.get("status") or {}).get("phase") in TERMINAL:
            self._finished[key] = _finished_order(pod)
            if len(self._finished) > self._threshold:
                self._queue.add(TERMINATED)
        else:
            self._finished.pop(key, None)

    def _sync(self, node: str) -> None:
        if node == TERMINATED:
            self._collect_finished()
            return
        out = self._nodes.get(node)
        if out is False:
            return
        on_node = self._cluster.list(
            self._pods_rt, None, field_selector=f"spec.nodeName={node}", copy_objects=False
        )["items"]
        for pod in on_node:
            if out is None:
                condition = nodehealth.disruption_condition(
                    nodehealth.POD_GC_REASON,
                    nodehealth.POD_GC_ORPHAN_MESSAGE,
                    self._clock.timestamp(),
                )
                self._fail_and_delete(pod, condition)
            elif pod["metadata"].get("deletionTimestamp"):
                self._fail_and_delete(pod, None)

    def _collect_finished(self) -> None:
        excess = len(self._finished) - self._threshold
        if excess <= 0:
            return
        oldest = sorted(self._finished, key=self._finished.__getitem__)[:excess]
        for key in oldest:
            pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False)
            if pod is not None:
                self._fail_and_delete(pod, None)

    def _fail_and_delete(self, pod: dict[str, Any], condition: dict[str, Any] | None) -> None:
        """`markFailedAndDeletePodWithCondition`: Failed first (no kubelet will say so), then a
        delete with grace 0."""
        meta = pod["metadata"]
        ns, name = str(meta["namespace"]), str(meta["name"])
        status = pod.get("status") or {}
        try:
            if status.get("phase") not in TERMINAL:
                status = {**status, "phase": "Failed"}
                if condition is not None:
                    status = nodehealth.with_condition(status, condition)
                self._cluster.update(
                    self._pods_rt, ns, name, {**pod, "status": status}, subresource="status"
                )
            self._cluster.delete(
                self._pods_rt, ns, name, options=DeleteOptions(grace_period_seconds=0)
            )
        except errors.StatusError as err:
            if err.code != 404:
                raise
