"""The Events a node's kubelet (and the scheduler that bound the pod) records about a pod, in the
words of Kubernetes 1.32 (pkg/kubelet/events, pkg/kubelet/kuberuntime, pkg/scheduler): both kubesim
kubelets, the timer one and the process runtime's, record through `PodEvents`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesim.controllers.events import MAX_KEYS, EventRecorder, EventType

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.cluster import Cluster


def field_path(container: str, *, init: bool = False) -> str:
    """The involvedObject.fieldPath the kubelet gives a container's events."""
    return f"spec.{'initContainers' if init else 'containers'}{{{container}}}"


def _image(pod: Mapping[str, Any], container: str, init: bool) -> str:
    spec = pod.get("spec") or {}
    for c in spec.get("initContainers" if init else "containers") or []:
        if c.get("name") == container:
            return str(c.get("image", ""))
    return ""


class PodEvents:
    """The events of the pods on the cluster's nodes: the kubelet's (its host is the pod's node) and
    the scheduler's `Scheduled`, recorded once per pod whichever of the two reports it first."""

    def __init__(self, cluster: Cluster, clock: Clock, node_name: str) -> None:
        self._cluster = cluster
        self._clock = clock
        self._kubelets: dict[str, EventRecorder] = {}
        self.kubelet = self._kubelet_on(node_name)
        self.scheduler = EventRecorder(
            cluster, clock, "default-scheduler", f"default-scheduler-{node_name}", scheduler=True
        )
        self._node = node_name
        self._scheduled: OrderedDict[str, None] = OrderedDict()

    def _kubelet_on(self, node: str) -> EventRecorder:
        recorder = self._kubelets.get(node)
        if recorder is None:
            recorder = self._kubelets[node] = EventRecorder(
                self._cluster, self._clock, "kubelet", node
            )
        return recorder

    def _kubelet(self, pod: Mapping[str, Any]) -> EventRecorder:
        node = (pod.get("spec") or {}).get("nodeName")
        return self.kubelet if not node or node == self._node else self._kubelet_on(str(node))

    def scheduled(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if uid in self._scheduled:
            return
        self._scheduled[uid] = None
        if len(self._scheduled) > MAX_KEYS:
            self._scheduled.popitem(last=False)
        node = (pod.get("spec") or {}).get("nodeName") or self._node
        message = (
            f"Successfully assigned {meta.get('namespace', '')}/{meta.get('name', '')} to {node}"
        )
        self.scheduler.event(pod, "Normal", "Scheduled", message, action="Binding")

    def failed_scheduling(self, pod: Mapping[str, Any], message: str) -> None:
        """A repeat of the same message bumps the event's series rather than adding one."""
        self.scheduler.event(pod, "Warning", "FailedScheduling", message, action="Scheduling")

    def started(self, pod: Mapping[str, Any], container: str, *, init: bool = False) -> None:
        """Pulled (the image is always present: IfNotPresent on a node that has it), Created,
        Started."""
        self.pulled(pod, container, init=init)
        self.created(pod, container, init=init)
        self.container_started(pod, container, init=init)

    def pulled(self, pod: Mapping[str, Any], container: str, *, init: bool = False) -> None:
        image = _image(pod, container, init)
        message = f'Container image "{image}" already present on machine'
        self._kubelet(pod).event(
            pod, "Normal", "Pulled", message, field_path=field_path(container, init=init)
        )

    def created(self, pod: Mapping[str, Any], container: str, *, init: bool = False) -> None:
        message = f"Created container: {container}"
        self._kubelet(pod).event(
            pod, "Normal", "Created", message, field_path=field_path(container, init=init)
        )

    def container_started(
        self, pod: Mapping[str, Any], container: str, *, init: bool = False
    ) -> None:
        message = f"Started container {container}"
        self._kubelet(pod).event(
            pod, "Normal", "Started", message, field_path=field_path(container, init=init)
        )

    def failed(
        self,
        pod: Mapping[str, Any],
        container: str,
        reason: str,
        message: str,
        *,
        init: bool = False,
    ) -> None:
        """A container could not be created (CreateContainerConfigError and the like): `Failed`."""
        self._kubelet(pod).event(
            pod,
            "Warning",
            "Failed",
            f"Error: {message or reason}",
            field_path=field_path(container, init=init),
        )

    def back_off(self, pod: Mapping[str, Any], container: str, *, init: bool = False) -> None:
        meta = pod.get("metadata") or {}
        who = f"{meta.get('name', '')}_{meta.get('namespace', '')}({meta.get('uid', '')})"
        self._kubelet(pod).event(
            pod,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {container} in pod {who}",
            field_path=field_path(container, init=init),
        )

    def killing(
        self, pod: Mapping[str, Any], container: str, *, init: bool = False, message: str = ""
    ) -> None:
        """`message` replaces the deletion's wording for other kills (a failed liveness probe's)."""
        text = message or f"Stopping container {container}"
        self._kubelet(pod).event(
            pod, "Normal", "Killing", text, field_path=field_path(container, init=init)
        )

    def failed_mount(self, pod: Mapping[str, Any], message: str) -> None:
        self._kubelet(pod).event(pod, "Warning", "FailedMount", message)

    def evicted(self, pod: Mapping[str, Any], message: str) -> None:
        self._kubelet(pod).event(pod, "Warning", "Evicted", message)

    def rejected(self, pod: Mapping[str, Any], reason: str, message: str) -> None:
        """The kubelet refused the pod at admission (`rejectPod`)."""
        self._kubelet(pod).event(pod, "Warning", reason, message)

    def container_event(
        self,
        pod: Mapping[str, Any],
        container: str,
        etype: str,
        reason: str,
        message: str,
        *,
        init: bool = False,
    ) -> None:
        """An event about one container in the caller's words (probe results, env warnings)."""
        kind: EventType = "Warning" if etype == "Warning" else "Normal"
        self._kubelet(pod).event(
            pod, kind, reason, message, field_path=field_path(container, init=init)
        )
