"""The batch/v1 Job controller (with the TTL-after-finished controller), as Kubernetes 1.32 runs it.

Pods are created from `spec.template` with the `batch.kubernetes.io/job-tracking` finalizer; a
finished pod is counted into `status.succeeded` / `status.failed` and then loses the finalizer, so
counts survive pod deletion. A failure or success criterion first sets the interim condition
(`FailureTarget` / `SuccessCriteriaMet`) and deletes the active pods; `Failed` / `Complete` follow
once no pod is left terminating. Replacement pods wait for the pod-failure back-off
(`settings.job_backoff_seconds`, doubling). A Job whose `spec.managedBy` names another controller is
left alone. Only NonIndexed completion is modelled (no podFailurePolicy, successPolicy or
backoffLimitPerIndex). Its Events are 1.32's: SuccessfulCreate / SuccessfulDelete per pod,
Suspended / Resumed, and Completed or the failure's reason as the Job ends.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubesim.clock import Clock
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none, resource_type
from kubesim.controllers import jobstate as js
from kubesim.controllers.events import EventRecorder
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

# ("job" | "pod", namespace, name)
Key = tuple[str, str, str]


def same_type(a: ResourceType, b: ResourceType) -> bool:
    return a.group == b.group and a.plural == b.plural


class JobController:
    name = "job-controller"

    def __init__(self, cluster: Cluster, settings: SimSettings, clock: Clock) -> None:
        self._cluster = cluster
        self._settings = settings
        self._clock = clock
        self._jobs_rt = resource_type(cluster, "batch/v1", "Job")
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[Key] = WorkQueue(clock)
        self.events = EventRecorder(cluster, clock, self.name)
        self._pods_by_job: dict[str, set[tuple[str, str]]] = {}
        # Precise simulated times (status timestamps have one-second resolution).
        self._started: dict[str, float] = {}
        self._finished: dict[str, float] = {}
        self._backoff: dict[str, tuple[int, float]] = {}

    async def run(self) -> None:
        for pod in self._cluster.list(self._pods_rt, None)["items"]:
            self.on_change("ADDED", self._pods_rt, pod, None)
        for job in self._cluster.list(self._jobs_rt, None)["items"]:
            self._queue.add(("job", job["metadata"]["namespace"], job["metadata"]["name"]))
        await process(self.name, self._queue, self._sync)

    # --- events ----------------------------------------------------------------------------------
    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if same_type(rt, self._jobs_rt):
            self._queue.add(("job", ns, name))
            if event == "DELETED":
                self._forget_job(str(meta.get("uid", "")))
            return
        if not same_type(rt, self._pods_rt):
            return
        owner = js.controller_uid(obj)
        if owner is not None:
            if event == "DELETED":
                pods = self._pods_by_job.get(owner[1])
                if pods is not None:
                    pods.discard((ns, name))
                    if not pods:
                        del self._pods_by_job[owner[1]]
            else:
                self._pods_by_job.setdefault(owner[1], set()).add((ns, name))
            self._queue.add(("job", ns, owner[0]))
        if event != "DELETED" and js.has_tracking_finalizer(obj):
            self._queue.add(("pod", ns, name))

    def _forget_job(self, uid: str) -> None:
        """The Job is gone: its pods must lose the tracking finalizer (the orphan path does
        that)."""
        for ns, name in self._pods_by_job.get(uid, ()):
            self._queue.add(("pod", ns, name))
        self._started.pop(uid, None)
        self._finished.pop(uid, None)
        self._backoff.pop(uid, None)

    def _sync(self, key: Key) -> None:
        if key[0] == "pod":
            self._sync_orphan(key[1], key[2])
        else:
            self._sync_job(key[1], key[2])

    # --- orphans ----------------------------------------------------------------------------------
    def _sync_orphan(self, ns: str, name: str) -> None:
        """A pod keeps the tracking finalizer only while a live Job controls it."""
        pod = get_or_none(self._cluster, self._pods_rt, ns, name, copy=False)
        if pod is None or not js.has_tracking_finalizer(pod):
            return
        owner = js.controller_uid(pod)
        if owner is not None:
            job = get_or_none(self._cluster, self._jobs_rt, ns, owner[0], copy=False)
            if job is not None and job["metadata"].get("uid") == owner[1]:
                return
        self._remove_finalizer(pod)

    def _remove_finalizer(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        remaining = [f for f in meta.get("finalizers") or [] if f != js.TRACKING_FINALIZER]
        body = {**pod, "metadata": {**meta, "finalizers": remaining}}
        self._cluster.update(self._pods_rt, meta["namespace"], meta["name"], body)

    # --- jobs -------------------------------------------------------------------------------------
    def _owned_pods(self, uid: str) -> list[dict[str, Any]]:
        pods = []
        for ns, name in list(self._pods_by_job.get(uid, ())):
            pod = get_or_none(self._cluster, self._pods_rt, ns, name, copy=False)
            if pod is not None and (js.controller_uid(pod) or ("", ""))[1] == uid:
                pods.append(pod)
        return pods

    def _sim_time(self, stamp: str | None, default: float) -> float:
        if not stamp:
            return default
        wall = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").timestamp()
        return self._clock.now() - (self._clock.wall().timestamp() - wall) / self._clock.scale

    def _sync_job(self, ns: str, name: str) -> None:
        job = get_or_none(self._cluster, self._jobs_rt, ns, name, copy=False)
        if job is None:
            return
        uid = str(job["metadata"]["uid"])
        spec = js.JobSpec.of(job)
        if not spec.managed_here:
            return
        status: dict[str, Any] = dict(job.get("status") or {})
        now = self._clock.now()
        stamp = self._clock.timestamp(now)
        pods = self._owned_pods(uid)
        if js.finished(status) is not None:
            for pod in pods:
                if js.has_tracking_finalizer(pod):
                    self._remove_finalizer(pod)
            self._after_finished(job, spec, status, now)
            return

        interim = js.condition(status, "FailureTarget") or js.condition(
            status, "SuccessCriteriaMet"
        )
        release = self._count_finished(uid, spec, pods, status, interim, now)
        conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
        active = [p for p in pods if js.is_active(p)]
        if interim is None and not spec.suspend:
            conditions = self._criteria(uid, spec, status, conditions, active, now)
            interim = js.condition({"conditions": conditions}, "FailureTarget") or js.condition(
                {"conditions": conditions}, "SuccessCriteriaMet"
            )

        if interim is not None:
            # Pods deleted because the Job is finishing keep the finalizer: they are counted as they
            # end.
            for pod in active:
                self._delete_pod(pod, keep_finalizer=True, job=job)
        elif spec.suspend:
            for pod in active:
                self._delete_pod(pod, keep_finalizer=False, job=job)
            if not js.condition(status, "Suspended"):
                self.events.event(job, "Normal", "Suspended", "Job suspended")
            conditions = js.set_condition(
                conditions, "Suspended", True, "JobSuspended", "Job suspended", stamp
            )
        else:
            if js.condition(status, "Suspended"):
                # Resuming restarts the clock of activeDeadlineSeconds.
                self.events.event(job, "Normal", "Resumed", "Job resumed")
                conditions = js.set_condition(
                    conditions, "Suspended", False, "JobResumed", "Job resumed", stamp
                )
                status.pop("startTime", None)
            if not status.get("startTime"):
                status["startTime"] = stamp
                self._started[uid] = now
            self._manage(job, spec, uid, int(status.get("succeeded", 0)), active, pods, now)
        for pod in release:
            self._remove_finalizer(pod)

        self._write_status(job, uid, status, conditions, interim, now)
        if js.finished(status) is not None:
            self._after_finished(job, spec, status, now)
        elif spec.active_deadline_seconds is not None and not spec.suspend and interim is None:
            started = self._started.get(uid, self._sim_time(status.get("startTime"), now))
            self._queue.add_after(("job", ns, name), started + spec.active_deadline_seconds - now)

    def _count_finished(
        self,
        uid: str,
        spec: js.JobSpec,
        pods: list[dict[str, Any]],
        status: dict[str, Any],
        interim: dict[str, Any] | None,
        now: float,
    ) -> list[dict[str, Any]]:
        """Counts finished pods still carrying the tracking finalizer; returns those to release."""
        succeeded, failed = int(status.get("succeeded", 0)), int(status.get("failed", 0))
        release: list[dict[str, Any]] = []
        new_failures = 0
        for pod in pods:
            if not js.has_tracking_finalizer(pod):
                continue
            consider_failed = js.is_pod_failed(pod, spec)
            if not js.can_remove_finalizer(pod, consider_failed, interim is not None):
                continue
            release.append(pod)
            if js.phase(pod) == "Succeeded":
                succeeded += 1
                self._backoff.pop(uid, None)
            elif consider_failed or (interim is not None and interim["type"] == "FailureTarget"):
                failed += 1
                new_failures += 1
        if new_failures:
            count, _ = self._backoff.get(uid, (0, now))
            self._backoff[uid] = (count + new_failures, now)
        _set_count(status, "succeeded", succeeded)
        _set_count(status, "failed", failed)
        return release

    def _criteria(
        self,
        uid: str,
        spec: js.JobSpec,
        status: dict[str, Any],
        conditions: list[dict[str, Any]],
        active: list[dict[str, Any]],
        now: float,
    ) -> list[dict[str, Any]]:
        """Adds FailureTarget or SuccessCriteriaMet when the Job has met one of its ends."""
        stamp = self._clock.timestamp(now)
        failure: tuple[str, str] | None = None
        if int(status.get("failed", 0)) > spec.backoff_limit or js.restarts_exceed_backoff(
            spec, active
        ):
            failure = js.BACKOFF_LIMIT_EXCEEDED
        elif self._past_deadline(uid, spec, status, now):
            failure = js.DEADLINE_EXCEEDED
        if failure is not None:
            return js.set_condition(conditions, "FailureTarget", True, *failure, stamp)
        if js.success_criteria_met(spec, int(status.get("succeeded", 0)), len(active)):
            return js.set_condition(
                conditions, "SuccessCriteriaMet", True, *js.COMPLETIONS_REACHED, stamp
            )
        return conditions

    def _write_status(
        self,
        job: dict[str, Any],
        uid: str,
        status: dict[str, Any],
        conditions: list[dict[str, Any]],
        interim: dict[str, Any] | None,
        now: float,
    ) -> None:
        """Pod counts as they are after this sync's actions; Complete/Failed once no pod is left."""
        stamp = self._clock.timestamp(now)
        pods = self._owned_pods(uid)
        active = [p for p in pods if js.is_active(p)]
        terminating = sum(1 for p in pods if js.is_terminating(p))
        _set_count(status, "active", len(active))
        status["ready"] = sum(1 for p in active if js.is_ready(p))
        status["terminating"] = terminating
        status["uncountedTerminatedPods"] = {}
        tracked = any(js.has_tracking_finalizer(p) for p in pods)
        if interim is not None and not active and terminating == 0 and not tracked:
            final = "Complete" if interim["type"] == "SuccessCriteriaMet" else "Failed"
            conditions = js.set_condition(
                conditions, final, True, interim["reason"], interim["message"], stamp
            )
            if final == "Complete":
                status["completionTime"] = stamp
                self.events.event(job, "Normal", "Completed", "Job completed")
            else:
                self.events.event(job, "Warning", interim["reason"], interim["message"])
            self._finished[uid] = now
        status["conditions"] = conditions
        if not conditions:
            del status["conditions"]
        if status != (job.get("status") or {}):
            meta = job["metadata"]
            self._cluster.update(
                self._jobs_rt,
                meta["namespace"],
                meta["name"],
                {**job, "status": status},
                subresource="status",
            )

    def _past_deadline(
        self, uid: str, spec: js.JobSpec, status: dict[str, Any], now: float
    ) -> bool:
        if spec.active_deadline_seconds is None or not status.get("startTime"):
            return False
        started = self._started.get(uid, self._sim_time(status.get("startTime"), now))
        return now >= started + spec.active_deadline_seconds

    def _manage(
        self,
        job: dict[str, Any],
        spec: js.JobSpec,
        uid: str,
        succeeded: int,
        active: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        now: float,
    ) -> None:
        want = js.wanted_active(spec, succeeded, len(active))
        if len(active) > want:
            newest = sorted(
                active, key=lambda p: str(p["metadata"].get("creationTimestamp", "")), reverse=True
            )
            for pod in newest[: len(active) - want]:
                self._delete_pod(pod, keep_finalizer=False, job=job)
            return
        busy = len(active) + (
            sum(1 for p in pods if js.is_terminating(p)) if spec.only_replace_failed else 0
        )
        missing = want - busy
        if missing <= 0:
            return
        failures, last = self._backoff.get(uid, (0, now))
        wait = last + js.backoff_seconds(self._settings.job_backoff_seconds, failures) - now
        if wait > 0:
            meta = job["metadata"]
            self._queue.add_after(("job", meta["namespace"], meta["name"]), wait)
            return
        body = js.new_pod(job)
        for _ in range(missing):
            created = self._cluster.create(self._pods_rt, job["metadata"]["namespace"], body).object
            self.events.event(
                job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )

    def _delete_pod(
        self, pod: dict[str, Any], *, keep_finalizer: bool, job: dict[str, Any]
    ) -> None:
        meta = pod["metadata"]
        if not keep_finalizer and js.has_tracking_finalizer(pod):
            self._remove_finalizer(pod)
        if get_or_none(self._cluster, self._pods_rt, meta["namespace"], meta["name"]) is not None:
            self._cluster.delete(self._pods_rt, meta["namespace"], meta["name"])
            self.events.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    def _after_finished(
        self, job: dict[str, Any], spec: js.JobSpec, status: dict[str, Any], now: float
    ) -> None:
        """The TTL-after-finished controller: delete the Job (Background) ttl seconds after it
        finished."""
        if spec.ttl_seconds_after_finished is None:
            return
        meta = job["metadata"]
        uid = str(meta["uid"])
        if uid not in self._finished:
            stamp = status.get("completionTime")
            if not stamp:
                failed = js.condition(status, "Failed") or {}
                stamp = failed.get("lastTransitionTime")
            self._finished[uid] = self._sim_time(stamp, now)
        due = self._finished[uid] + spec.ttl_seconds_after_finished
        if now >= due:
            if meta.get("deletionTimestamp") is None:
                self._cluster.delete(
                    self._jobs_rt,
                    meta["namespace"],
                    meta["name"],
                    options=DeleteOptions(propagation_policy="Background"),
                )
            return
        self._queue.add_after(("job", meta["namespace"], meta["name"]), due - now)


def _set_count(status: dict[str, Any], field: str, value: int) -> None:
    """active / succeeded / failed are `omitempty` int32s: a zero count is absent from the
    status."""
    if value:
        status[field] = value
    else:
        status.pop(field, None)
