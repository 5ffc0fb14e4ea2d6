"""The shape of the simulated cluster: its nodes (name, labels, taints, allocatable) and the Node
objects a kubelet registers for them.

Shapes come from `--nodes N --node-allocatable cpu=16,... [--gpu-replicas R]` (`uniform`), a
cluster file (`load_cluster_file`) or `SimSettings.nodes`. The default is one node whose capacity
never limits anything (`unlimited`): the scheduler skips the resource check there, so a cluster
nobody shaped behaves as kubesim always has. Pure: no cluster, no clock.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

GPU = "nvidia.com/gpu"
"""The NVIDIA device plugin's resource (`kubesim.devices` hands out its ids)."""
REPLICAS_LABEL = f"{GPU}.replicas"
"""GPU feature discovery's label for the plugin's time-slicing `replicas` (absent or 1: no sharing).
kubesim's device plugin reads it; a real one reads its config, from which the label is published."""
UNLIMITED_ALLOCATABLE: Mapping[str, str] = MappingProxyType(
    {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "1000",
        "ephemeral-storage": "1Ti",
        GPU: "8",
    }
)
"""What the default, unlimited node reports as its capacity and allocatable (nothing is
reserved)."""

DEFAULT_PODS = "110"
"""The kubelet's `--max-pods` default, the `pods` allocatable of a node whose shape does not say."""
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FIRST_NODE_IP = ipaddress.ip_address("172.18.0.2")
KUBELET_VERSION = "v1.32.0"

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$")
_SUFFIXES = ("", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ShapeError(ValueError):
    """A cluster shape that cannot be built; the message names the bad item or field."""


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "key": self.key,
            **({"value": self.value} if self.value else {}),
            "effect": self.effect,
        }


@dataclass(frozen=True)
class NodeShape:
    """One node. `allocatable` maps a resource name to its quantity text (capacity is the same: the
    simulated kubelet reserves nothing); `unlimited` nodes are never full, whatever they report."""

    name: str
    allocatable: Mapping[str, str] = field(default_factory=lambda: {"pods": DEFAULT_PODS})
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unlimited: bool = False
    gpu_replicas: int = 1
    """The NVIDIA device plugin's time-slicing `replicas` for `nvidia.com/gpu`: `allocatable` counts
    the node's GPUs, and its Node advertises that many times `gpu_replicas` (1: no sharing)."""


def default_allocatable() -> dict[str, str]:
    """What `--nodes N` without `--node-allocatable` gives each node: the default node's figures,
    110 pods."""
    return {**UNLIMITED_ALLOCATABLE, "pods": DEFAULT_PODS}


def unlimited_node(name: str) -> NodeShape:
    """The default cluster's one node."""
    return NodeShape(name, UNLIMITED_ALLOCATABLE, unlimited=True)


def is_default_shape(shapes: Sequence[NodeShape]) -> bool:
    """One unlimited node: every pod fits on it, so pods can be bound as they are created."""
    return len(shapes) == 1 and shapes[0].unlimited


def parse_allocatable(text: str, *, what: str = "--node-allocatable") -> dict[str, str]:
    """`cpu=16,memory=64Gi,nvidia.com/gpu=4` -> {resource: quantity}; `pods` defaults to 110."""
    allocatable: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        resource, sep, quantity = item.partition("=")
        if not sep:
            raise ShapeError(f"{what}: {item!r} is not resource=quantity")
        allocatable[resource.strip()] = quantity.strip()
    return checked_allocatable(allocatable, what)


def checked_allocatable(raw: Mapping[str, Any], what: str) -> dict[str, str]:
    allocatable: dict[str, str] = {}
    for resource, quantity in raw.items():
        name = str(resource)
        if not _RESOURCE.match(name):
            raise ShapeError(f"{what}: {name!r} is not a resource name")
        text = str(quantity)
        if isinstance(quantity, bool) or not _is_quantity(text):
            raise ShapeError(f"{what}.{name}: {text!r} is not a quantity (e.g. 16, 500m, 64Gi)")
        allocatable[name] = text
    allocatable.setdefault("pods", DEFAULT_PODS)
    return allocatable


def _is_quantity(text: str) -> bool:
    match = _QUANTITY.match(text)
    if not match or not _NUMBER.match(match.group(1)) or text.startswith("-"):
        return False
    suffix = match.group(2)
    return suffix in _SUFFIXES or bool(re.fullmatch(r"[eE][-+]?[0-9]+", suffix))


def uniform(
    count: int, allocatable: Mapping[str, str], *, gpu_replicas: int = 1
) -> tuple[NodeShape, ...]:
    """`count` identical nodes named kubesim-1 ... kubesim-count."""
    if count < 1:
        raise ShapeError(f"--nodes: {count} must be at least 1")
    checked_gpu_replicas(gpu_replicas, allocatable, "--gpu-replicas")
    return tuple(
        NodeShape(f"kubesim-{i}", dict(allocatable), gpu_replicas=gpu_replicas)
        for i in range(1, count + 1)
    )


def checked_gpu_replicas(replicas: Any, allocatable: Mapping[str, str], what: str) -> int:
    """Time-slicing needs whole GPUs to share: the plugin refuses a config it cannot apply."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ShapeError(f"{what}: {replicas!r} must be a whole number, at least 1")
    if replicas > 1 and physical_gpus(allocatable) is None:
        raise ShapeError(f"{what}: time-slicing needs a whole number of {GPU} in allocatable")
    return replicas


def physical_gpus(allocatable: Mapping[str, str]) -> int | None:
    """The shape's GPUs (None: none, or not a whole number)."""
    text = allocatable.get(GPU, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def load_cluster_file(path: str | Path) -> tuple[NodeShape, ...]:
    """A cluster file: `nodes: [{name, labels, taints: [{key, value, effect}], allocatable,
    gpuReplicas}]`."""
    text = Path(path).read_text()
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ShapeError(f"{path}: not YAML: {exc}") from exc
    return shapes_from_document(document, str(path))


def shapes_from_document(document: Any, source: str = "cluster") -> tuple[NodeShape, ...]:
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ShapeError(f"{source}: nodes: a list of nodes is required")
    unknown = sorted(set(document) - {"nodes"})
    if unknown:
        raise ShapeError(f"{source}: {unknown[0]}: unknown field")
    shapes = [_shape(entry, f"{source}: nodes[{i}]") for i, entry in enumerate(document["nodes"])]
    if not shapes:
        raise ShapeError(f"{source}: nodes: at least one node is required")
    seen: set[str] = set()
    for i, shape in enumerate(shapes):
        if shape.name in seen:
            raise ShapeError(f"{source}: nodes[{i}].name: {shape.name!r} is listed twice")
        seen.add(shape.name)
    return tuple(shapes)


def _shape(entry: Any, where: str) -> NodeShape:
    if not isinstance(entry, dict):
        raise ShapeError(f"{where}: must be a mapping")
    unknown = sorted(set(entry) - {"name", "labels", "taints", "allocatable", "gpuReplicas"})
    if unknown:
        raise ShapeError(f"{where}.{unknown[0]}: unknown field")
    name = entry.get("name")
    if not isinstance(name, str) or not _NODE_NAME.match(name) or len(name) > 253:
        raise ShapeError(f"{where}.name: {name!r} is not a DNS subdomain name")
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict):
        raise ShapeError(f"{where}.labels: must be a mapping")
    allocatable = entry.get("allocatable") or {}
    if not isinstance(allocatable, dict):
        raise ShapeError(f"{where}.allocatable: must be a mapping of resource to quantity")
    taints = entry.get("taints") or []
    if not isinstance(taints, list):
        raise ShapeError(f"{where}.taints: must be a list")
    checked = checked_allocatable(allocatable, f"{where}.allocatable")
    return NodeShape(
        name=name,
        allocatable=checked,
        labels={str(k): "" if v is None else str(v) for k, v in labels.items()},
        taints=tuple(_taint(t, f"{where}.taints[{i}]") for i, t in enumerate(taints)),
        gpu_replicas=checked_gpu_replicas(
            entry.get("gpuReplicas", 1), checked, f"{where}.gpuReplicas"
        ),
    )


def _taint(raw: Any, where: str) -> Taint:
    if not isinstance(raw, dict) or not raw.get("key"):
        raise ShapeError(f"{where}.key: required")
    effect = raw.get("effect")
    if effect not in TAINT_EFFECTS:
        raise ShapeError(f"{where}.effect: {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    return Taint(str(raw["key"]), str(effect), str(raw.get("value") or ""))


KUBELET_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
"""(type, status, reason, message) of the conditions a healthy kubelet posts."""


def posted_conditions(old: Sequence[Mapping[str, Any]], now: str) -> list[dict[str, Any]]:
    """The conditions a healthy kubelet posts at `now` over `old` (its node's current ones): the
    heartbeat is `now`; a condition's lastTransitionTime moves only when its status changes."""
    before = {str(c.get("type")): c for c in old}
    conditions = []
    for ctype, status, reason, message in KUBELET_CONDITIONS:
        previous = before.get(ctype)
        same = previous is not None and previous.get("status") == status
        conditions.append(
            {
                "type": ctype,
                "status": status,
                "lastHeartbeatTime": now,
                "lastTransitionTime": previous.get("lastTransitionTime", now)
                if same and previous is not None
                else now,
                "reason": reason,
                "message": message,
            }
        )
    return conditions


def node_ip(index: int) -> str:
    """The InternalIP of the `index`-th node (0: 172.18.0.2, the address kubesim always used)."""
    return str(FIRST_NODE_IP + index)


def node_object(shape: NodeShape, index: int, now: str) -> dict[str, Any]:
    """The Node a healthy kubelet registers for `shape`, status included (no heartbeats follow, so
    the cluster is quiet at rest)."""
    allocatable = dict(shape.allocatable)
    shared = physical_gpus(allocatable) if shape.gpu_replicas > 1 else None
    sharing: dict[str, str] = {}
    if shared is not None:
        # What the plugin advertises and GPU feature discovery publishes for time-slicing.
        allocatable[GPU] = str(shared * shape.gpu_replicas)
        sharing = {
            f"{GPU}.count": str(shared),
            REPLICAS_LABEL: str(shape.gpu_replicas),
            f"{GPU}.sharing-strategy": "time-slicing",
        }
    labels = {
        "kubernetes.io/hostname": shape.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        **sharing,
        **shape.labels,
    }
    spec: dict[str, Any] = {}
    if shape.taints:
        spec["taints"] = [t.to_json() for t in shape.taints]

    status = {
        # A kubelet always reports `pods` (--max-pods, 110 by default), whatever else it has.
        "capacity": {"pods": DEFAULT_PODS, **allocatable},
        "allocatable": {"pods": DEFAULT_PODS, **allocatable},
        "conditions": posted_conditions((), now),
        "addresses": [
            {"type": "InternalIP", "address": node_ip(index)},
            {"type": "Hostname", "address": shape.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": f"kubesim-{index}",
            "systemUUID": f"kubesim-{index}",
            "bootID": f"kubesim-{index}",
            "kernelVersion": "6.1.0",
            "osImage": "kubesim",
            "containerRuntimeVersion": "containerd://1.7.24",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": shape.name, "labels": labels},
        "spec": spec,
        "status": status,
    }
