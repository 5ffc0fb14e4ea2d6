"""The node lifecycle controller (`pkg/controller/nodelifecycle`): a node whose kubelet has been
silent for `SimSettings.node_monitor_grace_seconds` gets every condition Unknown, the
`node.kubernetes.io/unreachable` NoSchedule and NoExecute taints and a `NodeNotReady` event, and its
pods' Ready turns False; once the kubelet posts Ready again, the taints go.

kubesim's kubelets write no Lease: the heartbeat is the kubelet telling this controller it stopped
or started (`Kubelet.power_listeners`), so a healthy cluster costs no write. Logic: `nodehealth`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim.clock import Clock
from kubesim.controllers import get_or_none, nodehealth, resource_type
from kubesim.controllers.events import EventRecorder
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)


class NodeLifecycleController:
    name = "node-controller"

    def __init__(self, cluster: Cluster, settings: SimSettings, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._grace = settings.node_monitor_grace_seconds
        self._nodes_rt = resource_type(cluster, "v1", "Node")
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[str] = WorkQueue(clock)
        self._silent: dict[str, float] = {}
        """Nodes whose kubelet stopped posting, and since when."""
        self.events = EventRecorder(cluster, clock, self.name)

    async def run(self) -> None:
        await process(self.name, self._queue, self._sync)

    def kubelet_power(self, node: str, up: bool) -> None:
        """A node's kubelet stopped (`up` False: its last heartbeat is now) or started again."""
        if up:
            self._silent.pop(node, None)
            self._queue.add(node)
        else:
            self._silent[node] = self._clock.now()
            self._queue.add_after(node, self._grace)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural != "nodes" or rt != self._nodes_rt:
            return
        name = str(obj["metadata"]["name"])
        if event == "DELETED":
            self._silent.pop(name, None)
            self._queue.cancel(name)
        elif name not in self._silent and any(
            t.get("key") in nodehealth.HEALTH_TAINT_KEYS
            for t in (obj.get("spec") or {}).get("taints") or ()
        ):
            self._queue.add(name)  # a node that is posting again sheds the health taints

    def _sync(self, name: str) -> None:
        node = get_or_none(self._cluster, self._nodes_rt, None, name)
        if node is None:
            return
        since = self._silent.get(name)
        now = self._clock.now()
        if since is not None and now - since < self._grace:
            self._queue.add_after(name, since + self._grace - now)
            return
        if since is not None and nodehealth.ready_status(node) != "Unknown":
            node = self._mark_unknown(node)
        ready = "Unknown" if since is not None else nodehealth.ready_status(node)
        spec = node.get("spec") or {}
        taints = spec.get("taints") or []
        wanted = nodehealth.health_taints(taints, ready, self._clock.timestamp())
        if wanted != taints:
            spec = {k: v for k, v in spec.items() if k != "taints"}
            if wanted:
                spec["taints"] = wanted
            self._cluster.update(self._nodes_rt, None, name, {**node, "spec": spec})

    def _mark_unknown(self, node: dict[str, Any]) -> dict[str, Any]:
        name = str(node["metadata"]["name"])
        ts = self._clock.timestamp()
        status = dict(node.get("status") or {})
        status["conditions"] = nodehealth.unknown_conditions(status.get("conditions") or (), ts)
        written = self._cluster.update(
            self._nodes_rt, None, name, {**node, "status": status}, subresource="status"
        )
        self.events.event(
            node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady"
        )
        selector = f"spec.nodeName={name}"
        for pod in self._cluster.list(self._pods_rt, None, field_selector=selector)["items"]:
            changed = nodehealth.pod_not_ready(pod.get("status") or {}, ts)
            if changed is None:
                continue
            meta = pod["metadata"]
            self._cluster.update(
                self._pods_rt,
                meta["namespace"],
                meta["name"],
                {**pod, "status": changed},
                subresource="status",
            )
            self.events.event(pod, "Warning", "NodeNotReady", "Node is not ready")
        return written.object
