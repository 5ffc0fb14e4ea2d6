"""Knobs of the simulated cluster (`mpi-operator sim` flags and fixture arguments)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kubesim.clock import Clock
from kubesim.images import ImageCatalog
from kubesim.nodes import NodeShape, unlimited_node


@dataclass(frozen=True)
class SimSettings:
    start_seconds: float = 1.0
    """Default delay of a pod from Pending to Running (annotation `kubesim/start-seconds`
    overrides)."""
    ready_seconds: float = 1.0
    """Default delay from Running to Ready (annotation `kubesim/ready-seconds` overrides)."""
    volume_sync_seconds: float = 60.0
    """Kubelet sync period: a ConfigMap change reaches a mounted volume this late unless the pod
    changes."""
    fault_rate: float = 0.0
    """Fraction of write requests answered 500 without changing state; watches are also dropped at
    random."""
    history_size: int = 10_000
    """Watch events kept for resourceVersion replay; older resourceVersions get 410 Expired."""
    bookmark_seconds: float = 1.0
    """Interval of BOOKMARK events on watches that asked for them."""
    node_name: str = "kubesim-node"
    """The name of the default cluster's one node (when `nodes` is empty)."""
    nodes: tuple[NodeShape, ...] = ()
    """The cluster's nodes (`kubesim.nodes`); empty: one node named `node_name` whose capacity never
    limits anything, to which every pod is bound as it is created."""
    node_monitor_grace_seconds: float = 40.0
    """kube-controller-manager's `--node-monitor-grace-period`: how long a node's kubelet may be
    silent (`POST /kubesim/v1/nodes/{node}/down`) before its Ready condition becomes Unknown."""
    terminated_pod_gc_threshold: int = 12_500
    """kube-controller-manager's `--terminated-pod-gc-threshold`: finished pods kept before the
    oldest are deleted (0 keeps them all)."""
    time_scale: float = 1.0
    """Real seconds per simulated second for every controller timer (0.01 runs the cluster 100x
    faster)."""
    job_backoff_seconds: float = 10.0
    """Job controller's pod-failure back-off base (doubles per consecutive failure, capped at 10
    min)."""
    runtime: Literal["timer", "process"] = "timer"
    """What runs in a pod: `timer` (simulated lifecycle driven by `kubesim/*` annotations) or
    `process` (real programs in Linux namespaces, `kubesim.procrt`; needs root)."""
    images: ImageCatalog = field(default_factory=ImageCatalog)
    """Stand-in images for the process runtime (image reference -> directory, entrypoint,
    users...)."""
    cluster_domain: str = "cluster.local"
    """The DNS domain the process runtime's DNS server answers for."""
    priority_and_fairness: bool = True
    """Answers carry the `X-Kubernetes-PF-*` headers of API Priority and Fairness (`Control`)."""
    clock: Clock | None = field(default=None, compare=False)
    """The simulated time every controller timer runs on; None for real time at `time_scale` (what
    `mpi-operator sim` and the demo use). Tests pass a `kubesim.clock.FakeClock` and advance it,
    so nothing they check depends on the machine's speed; `time_scale` is then unused."""

    def node_shapes(self) -> tuple[NodeShape, ...]:
        """The nodes the cluster starts with."""
        return self.nodes or (unlimited_node(self.node_name),)
