"""GPUs as the NVIDIA device plugin gives them: each node's `nvidia.com/gpu` ids, which containers
hold which, and what a container sees through `NVIDIA_VISIBLE_DEVICES`.

Ids are named as the plugin names them, `GPU-<uuid>`; the UUID comes from the node's name and the
device's index, so runs are reproducible. A node labelled `nvidia.com/gpu.replicas` N > 1 shares
each GPU as the plugin's time-slicing does: N ids `GPU-<uuid>::0..N-1` per GPU, handed out evenly
across the GPUs; a container sees the GPUs behind the ids it holds. Allocation follows the
kubelet's device manager (`pkg/kubelet/cm/devicemanager/manager.go`, `Allocate` and
`devicesToAllocate`), done once at pod admission: see `NodeDevices`. The default, unlimited node
has the GPUs it reports and makes more ids on demand, so it never refuses a pod. Pure: no cluster,
no clock.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kubesim import nodes
from kubesim.admission.quantity import QuantityError, parse_quantity

GPU = nodes.GPU
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
"""The variable the plugin's `Allocate` answers with (its default `envvar` strategy), and the one
the NVIDIA container runtime reads to decide which GPUs a container gets."""
REPLICAS_LABEL = nodes.REPLICAS_LABEL
_NAMESPACE = uuid.UUID("5c0bb4b2-3ad5-4b07-9c43-4e3c5a1f0d21")
"""Fixed, so that `gpu_id` is the same in every run."""

ContainerDevices = dict[str, tuple[str, ...]]
"""Container name -> the GPU ids it was given (only containers that asked for some)."""


class AllocationError(Exception):
    """The node has too few free GPUs: the device manager's error, which the kubelet turns into
    the pod's rejection (`UnexpectedAdmissionError`)."""

    def __init__(self, needed: int, available: int) -> None:
        super().__init__(
            f"requested number of devices unavailable for {GPU}. "
            f"Requested: {needed}, Available: {available}"
        )
        self.needed = needed
        self.available = available


def gpu_id(node: str, index: int) -> str:
    """The id of the `index`-th GPU of `node` (index from 0)."""
    return f"GPU-{uuid.uuid5(_NAMESPACE, f'{node}/{index}')}"


def replica_id(gpu: str, replica: int) -> str:
    """The id the plugin advertises for one time-sliced share of `gpu` (its `AnnotatedID`)."""
    return f"{gpu}::{replica}"


def physical_id(device: str) -> str:
    """The GPU behind an advertised id: what `NVIDIA_VISIBLE_DEVICES` names."""
    return device.split("::", 1)[0]


def container_gpus(container: Mapping[str, Any]) -> int:
    """How many GPUs a container asks for: its `nvidia.com/gpu` limit, as the device manager reads
    it (admission makes the request equal; an unparsable quantity counts as none)."""
    limits = (container.get("resources") or {}).get("limits") or {}
    quantity = limits.get(GPU)
    if quantity is None:
        return 0
    try:
        return max(0, int(parse_quantity(quantity).value))
    except (QuantityError, TypeError, ValueError):
        return 0


def wants_gpus(spec: Mapping[str, Any]) -> bool:
    """Whether any container of the pod asks for GPUs (cheap: the common pod asks for none)."""
    for container in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        limits = (container.get("resources") or {}).get("limits")
        if limits and GPU in limits:
            return True
    return False


class NodeDevices:
    """One node's GPUs and who holds them. `count` None: a node that never runs out (ids are made
    on demand, lowest index first, and reused once freed). `count` is in advertised ids: with
    `replicas` > 1 (time-slicing), `count // replicas` GPUs of `replicas` ids each.

    `allocate` hands a pod's containers their ids as the device manager does at admission: init
    containers first, in order, then app containers; every container takes the ids an earlier
    (non-sidecar) init container of the pod held before any free one, since that container has
    finished by then; an app container or a sidecar keeps its ids to itself. Free ids go lowest
    index first (the device manager's choice is unordered, and the plugin's preferred allocation
    follows the GPUs' topology, which kubesim does not model). Shared ids go as the plugin's
    default `distributed` policy gives them: each next id from the GPU with the fewest ids in use,
    counting this pod's, lowest index first among equals."""

    def __init__(self, node: str, count: int | None, *, made: int = 0, replicas: int = 1) -> None:
        """`made`: for a node without a count, how many ids exist before any pod asks."""
        self.node = node
        self.count = count
        self.replicas = max(1, replicas) if count is not None else 1
        self._ids: list[str] = [self._device(i) for i in range(made if count is None else count)]
        self._position = {device: i for i, device in enumerate(self._ids)}
        self._in_use: dict[str, object] = {}
        """Id -> the pod key holding it."""
        self._pods: dict[object, ContainerDevices] = {}

    def resize(self, count: int) -> None:
        """The node's allocatable changed: later pods see `count` GPUs (ids beyond it stay with
        the pods holding them until they end)."""
        self.count = count
        while len(self._ids) < count:
            self._ids.append(self._device(len(self._ids)))
            self._position[self._ids[-1]] = len(self._ids) - 1

    def ids(self) -> tuple[str, ...]:
        """The node's advertised ids (for a node without a fixed count: those made so far)."""
        return tuple(self._ids if self.count is None else self._ids[: self.count])

    def gpus(self) -> tuple[str, ...]:
        """The node's GPUs, as the container runtime names them (one per GPU, shared or not)."""
        return tuple(dict.fromkeys(physical_id(device) for device in self.ids()))

    def _device(self, index: int) -> str:
        if self.replicas == 1:
            return gpu_id(self.node, index)
        return replica_id(gpu_id(self.node, index // self.replicas), index % self.replicas)

    def allocation(self, pod: object) -> ContainerDevices | None:
        return self._pods.get(pod)

    def pods(self) -> Mapping[object, ContainerDevices]:
        return self._pods

    def allocate(self, pod: object, spec: Mapping[str, Any]) -> ContainerDevices:
        """The pod's containers' ids (the same answer again for a pod already admitted), or
        AllocationError with nothing taken."""
        known = self._pods.get(pod)
        if known is not None:
            return known
        taken: list[str] = []
        given: ContainerDevices = {}
        reusable: list[str] = []
        free = self._free()

        def take(needed: int) -> tuple[str, ...]:
            ids = reusable[:needed]
            del reusable[:needed]
            remaining = needed - len(ids)
            if remaining and self.count is not None:
                available = self._free_count(set(taken))
                if available < remaining:
                    raise AllocationError(remaining, available)
            for _ in range(remaining):
                device = next(free)
                ids.append(device)
                taken.append(device)
            return tuple(ids)

        for container in spec.get("initContainers") or ():
            needed = container_gpus(container)
            if needed:
                ids = take(needed)
                given[str(container.get("name", ""))] = ids
                if container.get("restartPolicy") != "Always":
                    reusable.extend(ids)
                    reusable.sort(key=self._position.__getitem__)
        for container in spec.get("containers") or ():
            needed = container_gpus(container)
            if needed:
                given[str(container.get("name", ""))] = take(needed)
        for device in taken:
            self._in_use[device] = pod
        self._pods[pod] = given
        return given

    def release(self, pod: object) -> None:
        """The pod ended (terminal or gone): its ids are free again."""
        given = self._pods.pop(pod, None)
        for ids in (given or {}).values():
            for device in ids:
                if self._in_use.get(device) == pod:
                    del self._in_use[device]

    def _free(self) -> Iterator[str]:
        if self.replicas > 1:
            yield from self._free_shares()
            return
        index = 0
        while self.count is None or index < self.count:
            if index == len(self._ids):
                self._ids.append(self._device(index))
                self._position[self._ids[-1]] = index
            device = self._ids[index]
            if device not in self._in_use:
                yield device
            index += 1

    def _free_shares(self) -> Iterator[str]:
        """Free shared ids, each next one from the least used GPU (`distributed`)."""
        used = Counter(physical_id(device) for device in self._in_use)
        free: dict[str, list[str]] = {}
        for device in self.ids():
            if device not in self._in_use:
                free.setdefault(physical_id(device), []).append(device)
        rank = {gpu: i for i, gpu in enumerate(free)}
        while free:
            gpu = min(free, key=lambda g: (used[g], rank[g]))
            yield free[gpu].pop(0)
            used[gpu] += 1
            if not free[gpu]:
                del free[gpu]

    def _free_count(self, skip: set[str]) -> int:
        return sum(1 for device in self.ids() if device not in self._in_use and device not in skip)


def visible_devices(value: str | None, node_ids: Sequence[str]) -> tuple[str, ...]:
    """The GPUs the NVIDIA container runtime gives a container whose final environment has
    `NVIDIA_VISIBLE_DEVICES=value` (None: unset), as `DevicesFromEnvvars` reads it
    (`internal/config/image/cuda_image.go` of the container toolkit): unset, empty, `void` or
    `none` is no GPU, `all` every GPU of the node, otherwise the listed ids or indexes that the node
    has. The legacy rule (a CUDA image without the variable gets every GPU) is not modelled."""
    if value is None:
        return ()
    text = value.strip()
    if text in ("", "void", "none"):
        return ()
    if text == "all":
        return tuple(node_ids)
    seen: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        device = node_ids[int(item)] if item.isdigit() and int(item) < len(node_ids) else item
        if device in node_ids and device not in seen:
            seen.append(device)
    return tuple(seen)


class DeviceManager:
    """The GPUs of every node a kubelet loop serves: nodes learnt from their allocatable (a node in
    `unlimited` makes ids on demand), pods admitted and released by key."""

    def __init__(self, unlimited: Iterable[str] = ()) -> None:
        self._unlimited = frozenset(unlimited)
        self._counts: dict[str, int] = {}
        self._replicas: dict[str, int] = {}
        self._nodes: dict[str, NodeDevices] = {}
        self._pod_nodes: dict[Hashable, str] = {}

    def node_changed(
        self,
        name: str,
        allocatable: Mapping[str, Any] | None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A node's `status.allocatable` (None: the node is gone) and labels. A node's GPU count and
        time-slicing replicas are taken when its first GPU pod comes; a later change of the count
        counts for new pods only."""
        if allocatable is None:
            self._counts.pop(name, None)
            self._replicas.pop(name, None)
            return
        replicas = str((labels or {}).get(REPLICAS_LABEL) or "1")
        self._replicas[name] = int(replicas) if replicas.isdigit() and int(replicas) > 0 else 1
        quantity = allocatable.get(GPU)
        try:
            self._counts[name] = 0 if quantity is None else int(parse_quantity(quantity).value)
        except (QuantityError, TypeError, ValueError):
            self._counts[name] = 0
        known = self._nodes.get(name)
        if known is not None and name not in self._unlimited:
            known.resize(self._counts[name])

    def admit(self, node: str, pod: Hashable, spec: Mapping[str, Any]) -> ContainerDevices:
        """The pod's GPUs on `node` ({} for a pod that asks for none), or AllocationError. A node
        without GPUs has no plugin for them: the device manager leaves the request alone (the
        kubelet's resource check, which kubesim does not model, would refuse the pod)."""
        if not wants_gpus(spec):
            return {}
        if node not in self._unlimited and not self._counts.get(node):
            return {}
        given = self.node(node).allocate(pod, spec)
        self._pod_nodes[pod] = node
        return given

    def release(self, pod: Hashable) -> None:
        node = self._pod_nodes.pop(pod, None)
        if node is not None and node in self._nodes:
            self._nodes[node].release(pod)

    def allocation(self, pod: Hashable) -> ContainerDevices:
        node = self._pod_nodes.get(pod)
        return (self._nodes[node].allocation(pod) or {}) if node in self._nodes else {}

    def node(self, name: str) -> NodeDevices:
        known = self._nodes.get(name)
        if known is None:
            count = self._counts.get(name, 0)
            if name in self._unlimited:
                # What it reports exists; more ids are made when pods ask for more.
                known = NodeDevices(name, None, made=count)
            else:
                known = NodeDevices(name, count, replicas=self._replicas.get(name, 1))
            self._nodes[name] = known
        return known


def plugin_env(allocated: Sequence[str]) -> dict[str, str]:
    """What the plugin's `Allocate` answers for a container given `allocated` (envvar strategy):
    nothing for a container without GPUs. Shared ids name their GPUs, each once, as the plugin
    strips and de-duplicates them (`uniqueDeviceIDsFromAnnotatedDeviceIDs`)."""
    if not allocated:
        return {}
    return {VISIBLE_DEVICES: ",".join(dict.fromkeys(physical_id(d) for d in allocated))}


def final_visible_value(
    container: Mapping[str, Any], image_env: Mapping[str, str], allocated: Sequence[str]
) -> str | None:
    """`NVIDIA_VISIBLE_DEVICES` in the container's final environment (None: unset): the image's,
    overridden by the plugin's, overridden by a literal `env` value of the container (the kubelet
    passes the device plugin's variables before the container's own, and the runtime keeps the
    last). `valueFrom` and `envFrom` are not resolved here; the process runtime knows the real
    value."""
    value = image_env.get(VISIBLE_DEVICES)
    value = plugin_env(allocated).get(VISIBLE_DEVICES, value)
    for var in container.get("env") or ():
        if var.get("name") == VISIBLE_DEVICES and "valueFrom" not in var:
            value = str(var.get("value") or "")
    return value


def pod_resources(
    namespace: str,
    name: str,
    containers: Sequence[Mapping[str, Any]],
    allocated: Mapping[str, Sequence[str]],
    visible: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """One pod of the kubelet's PodResources `List` answer (`k8s.io/kubelet/pkg/apis/podresources/
    v1`, in its JSON names), with kubesim's `nvidiaVisibleDevices`: the GPUs the container runtime
    would give each container."""
    entries = []
    for container in containers:
        cname = str(container.get("name", ""))
        ids = list(allocated.get(cname) or ())
        entries.append(
            {
                "name": cname,
                "devices": [{"resourceName": GPU, "deviceIds": ids}] if ids else [],
                "nvidiaVisibleDevices": list(visible.get(cname) or ()),
            }
        )
    return {"name": name, "namespace": namespace, "containers": entries}
