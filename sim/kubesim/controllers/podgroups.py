"""PodGroup status, for both gang schedulers kubesim models: scheduler-plugins' PodGroup controller
(phase, running, succeeded, failed, scheduleStartTime) and Volcano's (phase past Inqueue, running,
succeeded, failed), from the group's pods (`kubesim.scheduling.gang` has the phase rules).

It keeps its own index of the pods of each group, so a change costs one group's pods, and it acts
only where a PodGroup kind is served (its CRD installed, as with the real schedulers).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.controllers import get_or_none, resource_type
from kubesim.scheduling import gang
from kubesim.scheduling.gang import GroupKey
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

GROUPS = {"scheduling.x-k8s.io": gang.COSCHEDULING, "scheduling.volcano.sh": gang.VOLCANO}
VERSIONS = {gang.COSCHEDULING: "v1alpha1", gang.VOLCANO: "v1beta1"}


class PodGroupController:
    name = "podgroups"

    def __init__(self, cluster: Cluster, clock: Clock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[GroupKey] = WorkQueue(clock)
        self._members: dict[GroupKey, set[str]] = {}

    async def run(self) -> None:
        await process(self.name, self._queue, self._sync)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt.plural == "pods" and rt == self._pods_rt:
            spec = obj.get("spec") or {}
            if spec.get("schedulerName") in (None, "default-scheduler"):
                return  # the common case costs this one lookup
            group = gang.group_of(obj)
            if group is None:
                return
            members = self._members.setdefault(group, set())
            if event == "DELETED":
                members.discard(obj["metadata"]["name"])
            else:
                members.add(obj["metadata"]["name"])
            self._queue.add(group)
        elif rt.plural == "podgroups" and rt.group in GROUPS and event != "DELETED":
            meta = obj["metadata"]
            self._queue.add((GROUPS[rt.group], str(meta.get("namespace", "")), str(meta["name"])))

    def _sync(self, group: GroupKey) -> None:
        flavor, namespace, name = group
        rt = self._cluster.registry.by_plural(
            next(g for g, f in GROUPS.items() if f == flavor), VERSIONS[flavor], "podgroups"
        )
        if rt is None:
            return
        pg = get_or_none(self._cluster, rt, namespace, name)
        if pg is None:
            return
        pods = [
            p
            for member in sorted(self._members.get(group, ()))
            if (p := get_or_none(self._cluster, self._pods_rt, namespace, member, copy=False))
        ]
        if not pods:
            self._members.pop(group, None)
        seen = gang.counts(pods)
        min_member = int((pg.get("spec") or {}).get("minMember") or 1)
        status = dict(pg.get("status") or {})
        phase = str(status.get("phase") or "")
        for _ in range(4):  # the controller's successive passes, to where they settle
            if flavor == gang.VOLCANO:
                new = gang.volcano_phase(phase, min_member, seen, admitted=False)
            else:
                new = gang.coscheduling_phase(phase, min_member, seen)
            if new == phase:
                break
            if new == "Scheduling" and not status.get("scheduleStartTime"):
                status["scheduleStartTime"] = self._clock.timestamp()
            phase = new
        wanted = {
            **status,
            "phase": phase,
            "running": seen.running,
            "succeeded": seen.succeeded,
            "failed": seen.failed,
        }
        if wanted == pg.get("status"):
            return
        pg["status"] = wanted
        try:
            self._cluster.update(rt, namespace, name, pg, subresource="status")
        except errors.StatusError as err:
            if err.code == 409:
                self._queue.add(group)  # changed meanwhile: again, from what it is now
            else:
                log.debug("kubesim: PodGroup %s/%s status not written: %s", namespace, name, err)
