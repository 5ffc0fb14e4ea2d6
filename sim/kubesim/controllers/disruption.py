"""The disruption controller: keeps each PodDisruptionBudget's status current (`kubesim.pdb`).

Incremental: it indexes budgets by namespace, and pods only in namespaces that have a budget, so a
pod change elsewhere costs one dict lookup; it keeps which pods each budget selects. A budget is
synced when it changes, when a pod it selects (before or after the change) changes, when the scale
of one of its pods' controllers changes, and when an entry of its `disruptedPods` runs out.
`expectedPods` for percentages and maxUnavailable sums the scale of the pods' controllers that have
a scale subresource; a pod without one counts as one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim import pdb
from kubesim.clock import Clock
from kubesim.controllers import get_or_none, resource_type
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

Key = tuple[str, str]


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


class _Selection:
    """Which pods each budget of one namespace selects, kept from pod and budget changes. A pod is
    tried only against the budgets indexed under one of its labels (a budget's first matchLabels
    pair) and those without matchLabels: trying every budget grew with jobs squared."""

    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}
        """budget -> the pods it selects"""
        self._of_pod: dict[str, set[str]] = {}
        self._selectors: dict[str, Any] = {}
        self._keys: dict[str, tuple[str, str] | None] = {}
        self._by_label: dict[tuple[str, str], set[str]] = {}
        self._unindexed: set[str] = set()

    def put_budget(
        self, name: str, budget: dict[str, Any], pods: dict[str, dict[str, Any]]
    ) -> None:
        selector = (budget.get("spec") or {}).get("selector")
        if name in self._selectors and self._selectors[name] == selector:
            return
        self.drop_budget(name)
        self._selectors[name] = selector
        match = (selector.get("matchLabels") if isinstance(selector, dict) else None) or {}
        key = min((str(k), str(v)) for k, v in match.items()) if match else None
        self._keys[name] = key
        if key is None:
            self._unindexed.add(name)
        else:
            self._by_label.setdefault(key, set()).add(name)
        self.members[name] = {p for p, pod in pods.items() if pdb.selects(budget, _labels(pod))}
        for pod_name in self.members[name]:
            self._of_pod.setdefault(pod_name, set()).add(name)

    def drop_budget(self, name: str) -> None:
        key = self._keys.pop(name, None)
        self._unindexed.discard(name)
        if key is not None:
            self._by_label.get(key, set()).discard(name)
        self._selectors.pop(name, None)
        for pod_name in self.members.pop(name, set()):
            self._of_pod.get(pod_name, set()).discard(name)

    def put_pod(
        self, name: str, labels: dict[str, str], budgets: dict[str, dict[str, Any]], gone: bool
    ) -> set[str]:
        """The budgets selecting the pod before or after this change."""
        before = self._of_pod.pop(name, set())
        after: set[str] = set()
        if not gone:
            candidates = {b for k, v in labels.items() for b in self._by_label.get((k, v), ())}
            candidates |= self._unindexed
            after = {b for b in candidates if b in budgets and pdb.selects(budgets[b], labels)}
        for budget in before - after:
            self.members.get(budget, set()).discard(name)
        for budget in after - before:
            self.members.setdefault(budget, set()).add(name)
        if after:
            self._of_pod[name] = after
        return before | after


class DisruptionController:
    name = "disruption-controller"

    def __init__(self, cluster: Cluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._pdb_rt = resource_type(cluster, "policy/v1", "PodDisruptionBudget")
        self._pod_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[Key] = WorkQueue(clock)
        self._budgets: dict[str, dict[str, dict[str, Any]]] = {}
        """namespace -> name -> the stored budget (read only)."""
        self._pods: dict[str, dict[str, dict[str, Any]]] = {}
        """namespace -> name -> the stored pod, for namespaces with a budget only."""
        self._selections: dict[str, _Selection] = {}
        """namespace -> which of its pods each of its budgets selects."""

    async def run(self) -> None:
        for budget in self._cluster.list(self._pdb_rt, None, copy_objects=False)["items"]:
            self.on_change("ADDED", self._pdb_rt, budget, None)
        await process(self.name, self._queue, self._sync)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        if rt.group == self._pod_rt.group and rt.plural == self._pod_rt.plural:
            pods = self._pods.get(namespace)
            if pods is None:
                return
            if event == "DELETED":
                pods.pop(meta["name"], None)
            else:
                pods[meta["name"]] = obj
            labels = meta.get("labels") or {}
            selection = self._selections[namespace]
            gone = event == "DELETED"
            for name in selection.put_pod(meta["name"], labels, self._budgets[namespace], gone):
                self._queue.add((namespace, name))
        elif rt.group == self._pdb_rt.group and rt.plural == self._pdb_rt.plural:
            self._budget_changed(event, namespace, str(meta["name"]), obj)
        elif rt.scale is not None and namespace in self._budgets:
            # A controller's replicas are the expectedPods of the budgets over its pods; its status
            # writes (an MPIJob's, many per job) leave them as they were.
            if old is not None and event != "DELETED" and _replicas(rt, obj) == _replicas(rt, old):
                return
            for name in self._budgets_over(namespace, str(meta.get("uid") or "")):
                self._queue.add((namespace, name))

    def _budgets_over(self, namespace: str, uid: str) -> set[str]:
        """The budgets selecting a pod whose controller is `uid`."""
        labels = [
            (pod.get("metadata") or {}).get("labels") or {}
            for pod in self._pods.get(namespace, {}).values()
            if _controller_uid(pod) == uid
        ]
        return {
            name
            for name, budget in self._budgets[namespace].items()
            if any(pdb.selects(budget, one) for one in labels)
        }

    def _budget_changed(
        self, event: EventType, namespace: str, name: str, obj: dict[str, Any]
    ) -> None:
        if event == "DELETED":
            budgets = self._budgets.get(namespace, {})
            budgets.pop(name, None)
            if namespace in self._selections:
                self._selections[namespace].drop_budget(name)
            if not budgets:
                self._budgets.pop(namespace, None)
                self._pods.pop(namespace, None)
                self._selections.pop(namespace, None)
            self._queue.cancel((namespace, name))
            return
        if namespace not in self._budgets:
            self._budgets[namespace] = {}
            stored = self._cluster.store.objects(self._pod_rt.storage_key, namespace)
            self._pods[namespace] = {p["metadata"]["name"]: p for p in stored}
            self._selections[namespace] = _Selection()
        self._budgets[namespace][name] = obj
        self._selections[namespace].put_budget(name, obj, self._pods[namespace])
        self._queue.add((namespace, name))

    def _sync(self, key: Key) -> None:
        namespace, name = key
        budget = get_or_none(self._cluster, self._pdb_rt, namespace, name, copy=False)
        if budget is None:
            return
        pods = self._pods.get(namespace, {})
        members = self._selections[namespace].members.get(name, set()) if pods else set()
        selected = {pod_name: pods[pod_name] for pod_name in sorted(members) if pod_name in pods}
        now = self._clock.wall()
        status = pdb.budget_status(budget, selected, self._scale(namespace, selected), now)
        if status != budget.get("status"):
            # Built in the decoded shape: the schema walk would take a condition's empty message,
            # which metav1.Condition allows, for a missing one.
            body = {**budget, "metadata": dict(budget["metadata"]), "status": status}
            self._cluster.update(
                self._pdb_rt, namespace, name, body, subresource="status", decoded=True
            )
        expiry = pdb.next_expiry(status.get("disruptedPods") or {})
        if expiry is not None:
            self._queue.add_after(key, max(1.0, (expiry - now).total_seconds() + 1))

    def _scale(self, namespace: str, pods: dict[str, dict[str, Any]]) -> int:
        """The replicas the selected pods' controllers ask for (each controller once)."""
        total, seen = 0, set()
        for pod in pods.values():
            ref = next(
                (
                    r
                    for r in (pod.get("metadata") or {}).get("ownerReferences") or []
                    if r.get("controller")
                ),
                None,
            )
            if ref is not None and ref.get("uid") in seen:
                continue
            replicas = self._controller_replicas(namespace, ref) if ref is not None else None
            if replicas is None:
                total += 1
            else:
                seen.add(ref.get("uid") if ref is not None else None)
                total += replicas
        return total

    def _controller_replicas(self, namespace: str, ref: dict[str, Any]) -> int | None:
        rt = self._cluster.registry.by_kind(
            str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        )
        if rt is None or rt.scale is None:
            return None
        owner = get_or_none(self._cluster, rt, namespace, str(ref.get("name") or ""), copy=False)
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            return None
        replicas = rt.scale.to_scale(owner).get("spec", {}).get("replicas")
        return int(replicas) if isinstance(replicas, int) else None


def _replicas(rt: ResourceType, obj: dict[str, Any]) -> object:
    assert rt.scale is not None
    return rt.scale.to_scale(obj).get("spec", {}).get("replicas")


def _controller_uid(pod: dict[str, Any]) -> str | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((str(r.get("uid")) for r in refs if r.get("controller")), None)
