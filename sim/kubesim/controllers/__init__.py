"""The controllers a cluster runs, simulated: kubelet, scheduler, Job controller, the garbage
collectors of owners and of pods, namespaces, volumes, disruption budgets, node lifecycle, taint
eviction, gangs (one module each; the process runtime's kubelet is `kubesim.procrt`).

This package module owns what they share: the `Controller` and `Watching` protocols and the lookups
they all make. The controllers learn about changes through one `Cluster.add_listener` callback that
fans out to their `on_change` (synchronous and cheap: they only record and enqueue keys) and act
from one asyncio task each, on a `kubesim.workqueue.WorkQueue` timed by a `kubesim.clock.Clock`; no
threads, no polling. `kubesim.app` builds and wires them.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubesim.cluster import Cluster, EventType
from kubesim.errors import StatusError
from kubesim.registry import ResourceType


class Controller(Protocol):
    name: str

    async def run(self) -> None:
        """Runs until cancelled."""


class Watching(Protocol):
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """Learns about a committed change; must only record and enqueue (it runs inside the
        write)."""


class WatchingController(Controller, Watching, Protocol):
    """A controller that also learns of every committed change (all of kubesim's do)."""


def resource_type(cluster: Cluster, api_version: str, kind: str) -> ResourceType:
    rt = cluster.registry.by_kind(api_version, kind)
    if rt is None:
        raise LookupError(f"kubesim registry has no {api_version} {kind}")
    return rt


def get_or_none(
    cluster: Cluster, rt: ResourceType, namespace: str | None, name: str, *, copy: bool = True
) -> dict[str, Any] | None:
    """The object or None; `copy=False` shares the stored object (no copy per read): read only."""
    try:
        return cluster.get(rt, namespace, name, copy_object=copy)
    except StatusError as err:
        if err.code == 404:
            return None
        raise
