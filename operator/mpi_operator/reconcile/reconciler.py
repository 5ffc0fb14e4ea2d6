"""The MPIJob reconciler: `reconcile(key)` strings the pure steps together, in seven steps.

  1 job      the MPIJobs store -> skip (gone, deleting, managed elsewhere) -> parse + validate
  2 observe  the child stores (never a LIST) plus the pods created not yet cached (`expectations`)
  3 elastic  `elastic.sync.prepare`: elastic jobs' clamp, step, builder inputs and elastic writes
  4 desired  `desired.build`, of the missing workers only one window (`planning.worker_window`)
  5 plan     `planning.plan`: every write, in phases; one the API would refuse: Invalid
  6 apply    the `Applier` sends the plan: the only writes to children
  7 status   `compute_status`, merge-patched to /status only when changed; workers left beyond the
             window: `Result(requeue=True)`, the next window queued behind the other jobs
Departures from upstream (`Invalid`, `LegacyFieldsMapped`, ...) are in `docs/architecture.md`.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, assert_never

from mpi_operator import desired as desired_state
from mpi_operator import planning, reasons
from mpi_operator.api import InvalidMPIJob, MPIJob
from mpi_operator.api import constants as c
from mpi_operator.api.normalize import unknown_fields
from mpi_operator.api.validation import worker_limit
from mpi_operator.api.versions import PREFERRED_API_VERSION
from mpi_operator.conditions import is_finished
from mpi_operator.desired import DesiredState, naming
from mpi_operator.elastic import ElasticDecision
from mpi_operator.elastic import sync as elastic_sync
from mpi_operator.kube import errors, resources
from mpi_operator.objects import (
    KubeObject,
    is_terminating,
    name_of,
    namespace_of,
    resource_version,
    uid_of,
)
from mpi_operator.planning import ObjectRef, Phase, TooLarge, progress
from mpi_operator.reasons import Event
from mpi_operator.reconcile import echoes
from mpi_operator.reconcile.applier import Applied, Applier, Report, collect_warning
from mpi_operator.reconcile.memory import Memories, StatusWrite
from mpi_operator.reconcile.observe import observe, priority_classes
from mpi_operator.reconcile.parsed import ParsedJobs
from mpi_operator.reconcile.progress_pacer import progress_hold
from mpi_operator.runtime import handlers
from mpi_operator.runtime.types import ManagerDeps, Reconciler, Result
from mpi_operator.status import (
    JobCounter,
    StatusUpdate,
    compute_status,
    format_time,
    normalize_status,
    progress_only,
    status_changed,
    status_merge_patch,
)

log = logging.getLogger(__name__)

CONDITION_INVALID: Final = "Invalid"
"""True while the spec does not validate; removed once it does."""
LEGACY_FIELDS_MAPPED: Final = "LegacyFieldsMapped"
POD_TEMPLATE_WARNING: Final = "PodTemplateWarning"
API_WARNING: Final = "APIWarning"

WATCH_SELECTORS: Final = handlers.WatchSelectors.owned_only()
"""Every child informer filtered to the operator's label: the reconciler labels every child."""

_TEMPLATES: Final = {
    "Pod": f"mpiReplicaSpecs.{c.REPLICA_WORKER}.template",
    "Job": f"mpiReplicaSpecs.{c.REPLICA_LAUNCHER}.template",
}


class ChildConflict(errors.KubeError):
    """Objects with the job's child names that it does not control: reported, retried with backoff.

    A `KubeError` because it is a state of the API, not a bug: the workers log it as one line."""


def watch_labels(job: MPIJob) -> dict[str, str]:
    """The labels that let the label-filtered informers see a child (and its job's name)."""
    return {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job.name}


def labelled(obj: dict[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """A shallow copy of `obj` with `labels` added to its metadata."""
    meta = {**obj["metadata"], "labels": {**(obj["metadata"].get("labels") or {}), **labels}}
    return {**obj, "metadata": meta}


def with_watch_labels(state: DesiredState, job: MPIJob) -> DesiredState:
    """Upstream labels the Service, ConfigMap, Secret and launcher Job only `app: <job>`, and the
    PodGroup not at all; add ours (without it the PodGroup informer never sees the PodGroup, which
    is then neither updated nor deleted on suspend without a 409 first)."""
    extra = watch_labels(job)
    return dataclasses.replace(
        state,
        service=labelled(state.service, extra),
        config_map=labelled(state.config_map, extra),
        secret=labelled(state.secret, extra) if state.secret is not None else None,
        launcher_job=labelled(state.launcher_job, extra),
        pod_group=labelled(state.pod_group, extra) if state.pod_group is not None else None,
        pdb=labelled(state.pdb, extra) if state.pdb is not None else None,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def managed_by(raw: Mapping[str, Any]) -> str | None:
    """`spec.runPolicy.managedBy` read defensively from the stored object (checked before
    validation)."""
    value = _mapping(_mapping(_mapping(raw.get("spec")).get("runPolicy"))).get("managedBy")
    return value if isinstance(value, str) and value else None


def aggregate(items: list[str]) -> str:
    """Go's `utilerrors.NewAggregate(...).Error()`: one error bare, several as `[a, b]`."""
    return items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"


def too_large_message(problem: TooLarge) -> str:
    """The problem, and the template it comes from when the user's pod template is the cause."""
    template = _TEMPLATES.get(problem.ref.kind)
    if template is not None and (
        problem.ref.kind == "Pod" or problem.field.startswith("spec.template")
    ):
        return f"{problem} (from spec.{template})"
    return str(problem)


def without_invalid(job: MPIJob) -> MPIJob:
    """The job with the reconciler's own `Invalid` condition dropped, as the status steps expect."""
    if job.status is None or not any(
        cond.type == CONDITION_INVALID for cond in job.status.conditions
    ):
        return job
    conditions = [cond for cond in job.status.conditions if cond.type != CONDITION_INVALID]
    return job.model_copy(
        update={"status": job.status.model_copy(update={"conditions": conditions})}
    )


_ENDINGS = (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED)


def _ending(status: Mapping[str, Any] | None) -> tuple[object, ...]:
    conditions = (status or {}).get("conditions")
    return (
        (status or {}).get("completionTime"),
        *(
            (cond.get("type"), cond.get("status"), cond.get("reason"))
            for cond in (conditions if isinstance(conditions, list) else ())
            if isinstance(cond, Mapping) and cond.get("type") in _ENDINGS
        ),
    )


def ends_differently(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """The status write changed what a sync plans from the job's own status: whether and how it
    finished (Succeeded, Failed and their reasons: the elastic below-minimum stop) and its
    completionTime (the second phase of the finish, cleanPodPolicy)."""
    return _ending(old) != _ending(new)


class MPIJobReconciler:
    """Converges one MPIJob per call; see the module docstring. State kept here is only an
    optimization."""

    def __init__(self, deps: ManagerDeps) -> None:
        self.deps = deps
        self.kube = deps.kube
        self.stores = deps.stores
        self.recorder = deps.recorder
        self.settings = deps.settings
        self._max_workers = worker_limit(deps.settings.max_workers_per_job)
        self.memories = Memories(deps.clock.now)
        """What is remembered of each job between syncs (`memory`), forgotten when it leaves the
        cache."""
        self._parsed = ParsedJobs(
            gpus_per_node=deps.settings.gpus_per_node,
            max_workers=self._max_workers,
            cluster_domain=deps.settings.cluster_domain,
        )
        # One client serves every worker: warnings reach the write that caused them through a
        # contextvar.
        deps.kube.on_warning = collect_warning

    async def reconcile(self, key: str) -> Result:
        raw = self._latest(key, self.stores.mpijobs.get(key))
        if raw is None:
            self.memories.forget(key)
            namespace, _, name = key.partition("/")
            self.deps.metrics.remove_job_info(
                launcher=name + naming.LAUNCHER_SUFFIX, namespace=namespace
            )
            self.deps.metrics.remove_elastic_workers(namespace=namespace, mpijob=name)
            self.deps.metrics.remove_pending_workers(namespace=namespace, mpijob=name)
            return Result()
        meta = _mapping(raw.get("metadata"))
        if meta.get("deletionTimestamp"):
            return Result()  # the garbage collector removes the children
        owner = managed_by(raw)
        if owner is not None and owner != c.CONTROLLER_NAME:
            return Result()
        obj = {"apiVersion": c.API_VERSION, "kind": c.KIND, **raw}
        try:
            normalized = self._parsed.parse(key, raw, obj)
        except InvalidMPIJob as exc:
            # A typo the API server dropped often explains the error: name it, and its fix.
            dropped = [u.message("dropped by the API server") for u in unknown_fields(raw)]
            await self._report_invalid(key, raw, [*(str(e) for e in exc.errors), *dropped])
            return Result()
        memory = self.memories.of(key)
        job = without_invalid(normalized.job)  # step 1: the job, valid and canonical
        legacy = "; ".join(str(note) for note in normalized.notes)
        namespace = job.namespace
        now = self.deps.clock.now()
        in_flight = memory.created_pods.pending(
            job.uid, lambda name: self.stores.pods.get(f"{namespace}/{name}") is not None, now
        )
        observed = self._with_fresher_config(key, observe(self.stores, job, in_flight))  # step 2
        echo, memory.echo = memory.echo, None
        if echo is not None and echo.heard(echoes.state_of(raw, observed), now):
            memory.echo = echo
            self.deps.metrics.echo_skipped()
            return Result()
        result, left = await self._sync(key, raw, job, legacy, observed)
        expiry = memory.created_pods.expires_in(self.deps.clock.now()) if in_flight else None
        if expiry is not None and not result.requeue:
            # This sync counted pods created by an earlier one that the store still does not show:
            # if one never arrives (gone again while the pod watch was down), no event would say
            # so. Pods created by this sync are left to their own watch events (waking every job
            # 30 s after its creates would cost a sync per job for nothing).
            wait = expiry if result.requeue_after is None else min(result.requeue_after, expiry)
            result = dataclasses.replace(result, requeue_after=wait)
        if left is not None and not result.requeue:
            until = None
            if result.requeue_after is not None:
                until = self.deps.clock.now() + result.requeue_after
            memory.echo = dataclasses.replace(left, until=until)
        return result

    def _latest(self, key: str, cached: KubeObject | None) -> KubeObject | None:
        """The cached MPIJob, or the one our last status write returned while the cache lags behind
        it.

        Without this, the child events that follow a status write reconcile the pre-write object and
        fail with 409 Conflict (a wasted write and a retry per job start)."""
        memory = self.memories.get(key)
        written = memory.written if memory is not None else None
        if memory is None or cached is None or written is None:
            return cached
        latest = written.over(cached)
        if latest is None:
            memory.written = None
            return cached
        return latest

    async def _sync(
        self,
        key: str,
        raw: Mapping[str, Any],
        job: MPIJob,
        legacy: str,
        observed: planning.Observed,
    ) -> tuple[Result, echoes.Echo | None]:
        """Steps 3 to 7 on what step 2 `observed`; also returns the state the sync leaves, when
        its echoes may be skipped (`echoes`)."""
        settings = self.settings
        sync = elastic_sync.prepare(
            job, observed, now=self.deps.now(), cluster_domain=settings.cluster_domain
        )
        decision = sync.decision if sync is not None else None
        if sync is not None:
            job = sync.job
        keys = (
            desired_state.generate_ssh_keys()
            if planning.secret_needs_keys(observed.secret)
            else None
        )
        state = desired_state.build(  # step 4: of the missing workers, one window
            job,
            observed_pods=observed.worker_pods,
            settings=settings,
            ssh_keys=keys,
            priority_classes=priority_classes(self.stores),
            elastic=sync.inputs if sync is not None else None,
            worker_indices=planning.worker_window(job, observed).indices,
        )
        plan = planning.plan(  # step 5
            with_watch_labels(state, job),
            observed,
            job=job,
            elastic=sync.writes if sync is not None else None,
            gang=settings.gang_scheduling,
        )
        too_large = planning.plan_problems(plan)
        if too_large:
            # The API would refuse these on every retry: say why once, write nothing, do not
            # requeue.
            await self._report_invalid(
                key, raw, [too_large_message(problem) for problem in too_large]
            )
            return Result(), None
        if await self._confirmed_gone(key, job, plan):
            return Result(), None  # the informer drops the job; its collected children stay gone
        if sync is not None and await self._config_map_lags(key, observed, plan):
            return Result(requeue=True), None  # planned again from the ConfigMap the API holds
        hold, held = 0.0, False
        if sync is None:  # a static job's progress may wait for its other pods (planning.progress)
            settled = progress.settled(job, planning.observed_after(observed, plan))
            hold = progress_hold(
                self.memories.of(key).status_written_at,
                self.deps.clock.now(),
                settings.progress_batch_seconds,
                settled=settled,
            )
            if hold:
                plan, held = progress.without_discovery_refresh(plan, observed)
        for action in plan.actions:
            if isinstance(action, planning.Delete) and action.ref.kind == "Pod":
                self.memories.of(key).created_pods.discard(action.ref.name)
        current = self._is_current(key, job)
        applier = Applier(
            self.kube,
            job,
            watch_labels(job),
            self._reporter(raw),
            self.memories.of(key).deleted,
            current,
            created=self._expect(key, job),
        )
        applied = await applier.apply(plan)  # step 6
        if applied.abandoned:
            log.info("the MPIJob went away during its sync: the rest of its writes were not sent")
            return Result(), None
        self._events(raw, applied.events)
        if decision is not None:
            self._count_elastic(decision, applied)
            self._track_convergence(key, job, decision)
        self._gauge_elastic(job, decision)
        self._report_warnings(raw, applied.warnings)
        conflicts = [*plan.conflicts, *applied.conflicts]
        if conflicts:
            for conflict in conflicts:
                self._event(raw, reasons.WARNING, conflict.reason, conflict.message)
            raise ChildConflict("; ".join(conflict.message for conflict in conflicts))
        self._events(raw, [*plan.events, *(decision.events if decision is not None else [])])

        now = self.deps.now()  # step 7
        after = planning.observed_after(observed, plan)
        update = compute_status(job, after, now=now, fail_on_eviction=sync is None)
        if decision is not None:
            update = elastic_sync.finish_status(update, decision, now=now)
        self._gauge_pending(job, update)
        stored = raw.get("status") if isinstance(raw.get("status"), Mapping) else None
        again = False  # a status the next sync must plan from was written
        job_now: Mapping[str, Any] = raw  # as the API holds it after this sync
        if hold and progress_only(stored, update.status):
            held = True  # the requeue below writes it, unless an earlier sync does
        else:
            again, written = await self._write_status(key, raw, job, update, legacy)
            job_now = written or raw
        if observed.launcher_job is not None or any(r.kind == "Job" for r in applied.written):
            self.deps.metrics.set_job_info(
                launcher=naming.launcher_name(job), namespace=job.namespace
            )
        if plan.deferred_workers or again:
            # More workers than one window: the status above says the job was seen; the next window
            # waits behind every other queued job (and recomputes any elastic timer).
            return Result(requeue=True), None
        left = None
        # Elastic jobs leave none: each step of a host change is planned from the cache showing the
        # write of the step before, so that echo is what moves them on.
        if sync is None and not any(isinstance(a, planning.Delete) for a in plan.actions):
            left = echoes.Echo.after(job_now, observed, applied.written)
        if decision is None:
            return Result(requeue_after=hold if held else None), left
        return Result(requeue_after=decision.requeue_after), left

    def _expect(self, key: str, job: MPIJob) -> Callable[[KubeObject], None]:
        """Records each worker pod the applier creates until the pod store shows it (`CreatedPods`),
        and every other child it creates (`MadeChildren`)."""
        uid = job.uid
        memory = self.memories.of(key)

        def created(obj: KubeObject) -> None:
            if not naming.is_controlled_by(obj, job):
                return
            if obj.get("kind") == "Pod":
                memory.created_pods.add(uid, obj, self.deps.clock.now())
            else:
                memory.made.add(uid, obj)

        return created

    def _with_fresher_config(self, key: str, observed: planning.Observed) -> planning.Observed:
        """`observed`, with the ConfigMap `_config_map_lags` read while the cache still shows the
        version it replaced; once the cache shows another version, the cache is the truth again."""
        memory = self.memories.of(key)
        entry = memory.fresher_config
        cached = observed.config_map
        if entry is None:
            return observed
        stale, fresh = entry
        if cached is None or resource_version(cached) != stale or uid_of(fresh) != uid_of(cached):
            memory.fresher_config = None
            return observed
        return dataclasses.replace(observed, config_map=fresh)

    async def _config_map_lags(
        self, key: str, observed: planning.Observed, plan: planning.Plan
    ) -> bool:
        """Whether the cached ConfigMap of an elastic job is older than the API's, asked only before
        the plan creates worker pods: the elastic state in it says which incarnation, so which host
        name, a new pod gets. A lagging ConfigMap watch (one in backoff, or after a failover) would
        hand out a name Horovod may have blacklisted, and the pod would be deleted as superseded
        once the cache caught up. One GET; a stale cache means the job is planned again from what
        the GET returned."""
        cached = observed.config_map
        if cached is None or not any(
            isinstance(action, planning.Create) and action.ref.kind == "Pod"
            for action in plan.actions
        ):
            return False
        try:
            fresh = await self.kube.get(
                resources.CONFIG_MAP, name_of(cached), namespace=namespace_of(cached)
            )
        except errors.KubeError:
            return False  # cannot tell: go on as before
        if resource_version(fresh) == resource_version(cached):
            return False
        log.info(
            "the cached ConfigMap lags behind the API's: planning the elastic job again from the "
            "API's"
        )
        self.memories.of(key).fresher_config = (resource_version(cached) or "", fresh)
        return True

    async def _confirmed_gone(self, key: str, job: MPIJob, plan: planning.Plan) -> bool:
        """Whether the job is gone from the API although the cache holds it, asked only when the
        plan would re-create a child created before (see `recreates`)."""
        made = self.memories.of(key).made
        if made.is_gone(job.uid):
            return True
        creates = [action.ref for action in plan.actions if isinstance(action, planning.Create)]
        if not made.recreates(job.uid, creates):
            return False
        try:
            stored = await self.kube.get(resources.MPIJOB, job.name, namespace=job.namespace)
        except errors.NotFound:
            stored = None
        except errors.KubeError:
            return False  # cannot tell: repair as before
        if stored is not None and uid_of(stored) == job.uid and not is_terminating(stored):
            return False
        log.info(
            "the MPIJob is gone from the API (its cache lags): its missing children are not "
            "re-created"
        )
        made.mark_gone(job.uid)
        return True

    def _is_current(self, key: str, job: MPIJob) -> Callable[[], bool]:
        """Whether the store still holds this job (same uid, not being deleted): checked between
        writes, so a deleted job stops getting children within a batch of its deletion."""
        uid = job.metadata.get("uid")

        def current() -> bool:
            stored = self.stores.mpijobs.get(key)
            return stored is not None and uid_of(stored) == uid and not is_terminating(stored)

        return current

    async def _write_status(
        self, key: str, raw: Mapping[str, Any], job: MPIJob, update: StatusUpdate, legacy: str
    ) -> tuple[bool, KubeObject | None]:
        """Step 7: the status merge patch, only when it says something new, with its events and
        counts. Returns whether the next sync must plan from the status written
        (`ends_differently`: the watch event of the write does not bring one, `runtime.handlers`),
        and the MPIJob the API returned, None when nothing was written."""
        old = raw.get("status") if isinstance(raw.get("status"), Mapping) else None
        if not status_changed(old, update.status):
            return False, None
        rv = str(_mapping(raw.get("metadata")).get("resourceVersion") or "") or None
        patch = status_merge_patch(old, update.status, resource_version=rv)
        written = await self.kube.patch_status(
            resources.MPIJOB, job.name, patch, namespace=job.namespace
        )
        memory = self.memories.of(key)
        memory.status_written_at = self.deps.clock.now()
        if rv is not None:
            memory.written = StatusWrite.of(rv, written)
            self._parsed.written(key, raw, written)
        if legacy and update.status.get("observedGeneration") != normalize_status(old).get(
            "observedGeneration"
        ):
            # Once per generation, even across restarts: observedGeneration was just written with
            # it.
            self._event(
                raw, reasons.NORMAL, LEGACY_FIELDS_MAPPED, f"deprecated fields mapped: {legacy}"
            )
        self._events(raw, update.events)
        for counter in update.counters:
            self._count_job(counter)
        return ends_differently(old, update.status), written

    def _count_job(self, counter: JobCounter) -> None:
        metrics = self.deps.metrics
        if counter is JobCounter.CREATED:
            metrics.job_created()
        elif counter is JobCounter.SUCCEEDED:
            metrics.job_succeeded()
        elif counter is JobCounter.FAILED:
            metrics.job_failed()
        else:
            assert_never(counter)

    def _count_elastic(self, decision: ElasticDecision, applied: Applied) -> None:
        """The script counts as updated once its ConfigMap write went out; replacements once
        deleted."""
        if decision.discovery_changed and applied.completed(Phase.DISCOVERY):
            self.deps.metrics.discovery_updated()
        if applied.completed(Phase.RELEASE):
            self.deps.metrics.workers_replaced(len(decision.replace))

    def _gauge_elastic(self, job: MPIJob, decision: ElasticDecision | None) -> None:
        """Per-job worker gauges while an elastic job runs; none for static, finished or suspended
        jobs (a suspended job has no ready workers by request, which an alert must not read as a
        loss)."""
        metrics = self.deps.metrics
        if decision is None or job.spec.run_policy.suspend:
            metrics.remove_elastic_workers(namespace=job.namespace, mpijob=job.name)
            return
        status = decision.status
        metrics.set_elastic_workers(
            namespace=job.namespace,
            mpijob=job.name,
            desired=status["desired"],
            ready=status["ready"],
            discovered=status["discovered"],
            min_replicas=status["minReplicas"],
        )

    def _gauge_pending(self, job: MPIJob, update: StatusUpdate) -> None:
        """Every running job's unplaceable workers, 0 included (an alert reads a 0 as fine and a
        missing series as unknown); a finished or suspended job waits for nothing: no series."""
        metrics = self.deps.metrics
        if is_finished(update.status) or job.spec.run_policy.suspend:
            metrics.remove_pending_workers(namespace=job.namespace, mpijob=job.name)
        else:
            metrics.set_pending_workers(
                namespace=job.namespace, mpijob=job.name, pending=update.pending_workers
            )

    def _track_convergence(self, key: str, job: MPIJob, decision: ElasticDecision) -> None:
        """Times how long discovered workers differ from the desired count (process-local, best
        effort).

        A suspended job is not converging on anything: its clock restarts when it resumes."""
        memory = self.memories.of(key)
        if job.spec.run_policy.suspend:
            memory.diverged_since = None
            return
        converged = decision.status.get("discovered") == decision.status.get("desired")
        since = memory.diverged_since
        now = self.deps.clock.now()
        if not converged and since is None:
            memory.diverged_since = now
        elif converged and since is not None:
            memory.diverged_since = None
            self.deps.metrics.observe_elastic_convergence(now - since)

    async def _report_invalid(self, key: str, raw: Mapping[str, Any], problems: list[str]) -> None:
        """Nothing is created; the Invalid condition and a ValidationError Warning say why, field by
        field."""
        meta = _mapping(raw.get("metadata"))
        message = reasons.validation_error_message(aggregate(problems or ["invalid MPIJob"]))
        raw_status = raw.get("status")
        old = normalize_status(raw_status) if isinstance(raw_status, Mapping) else {}
        new = copy.deepcopy(old)
        previous = next(
            (x for x in new.get("conditions", []) if x.get("type") == CONDITION_INVALID), None
        )
        now = format_time(self.deps.now())
        condition = {
            "type": CONDITION_INVALID,
            "status": "True",
            "reason": reasons.VALIDATION_ERROR,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }
        if (
            previous is not None
            and previous.get("status") == "True"
            and previous.get("lastTransitionTime")
        ):
            condition["lastTransitionTime"] = previous["lastTransitionTime"]
        others = [x for x in new.get("conditions", []) if x.get("type") != CONDITION_INVALID]
        new["conditions"] = [*others, condition]
        generation = meta.get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool):
            new["observedGeneration"] = generation
        stale = (
            previous is None
            or previous.get("message") != message
            or old.get("observedGeneration") != new.get("observedGeneration")
        )
        if stale:
            rv = str(meta.get("resourceVersion") or "") or None
            patch = status_merge_patch(old, new, resource_version=rv)
            try:
                await self.kube.patch_status(
                    resources.MPIJOB,
                    str(meta.get("name")),
                    patch,
                    namespace=str(meta.get("namespace")),
                )
            except (errors.Invalid, errors.BadRequest) as exc:  # a junk object the API cannot store
                log.warning("cannot write the Invalid condition: %s", exc)
            self._event(raw, reasons.WARNING, reasons.VALIDATION_ERROR, message)

    def _reporter(self, raw: Mapping[str, Any]) -> Report:
        return lambda event_type, reason, message: self._event(raw, event_type, reason, message)

    def _report_warnings(
        self, raw: Mapping[str, Any], warnings: list[tuple[ObjectRef, str]]
    ) -> None:
        """One event per distinct (template, warning) of this sync; repeats aggregate in the
        recorder."""
        for template, text in dict.fromkeys(
            (_TEMPLATES.get(ref.kind), text) for ref, text in warnings
        ):
            if template is not None:
                message = f"{template}: {text} (API server warning on the objects created from it)"
                self._event(raw, reasons.WARNING, POD_TEMPLATE_WARNING, message)
            else:
                self._event(raw, reasons.WARNING, API_WARNING, text)

    def _events(self, raw: Mapping[str, Any], events: Sequence[Event]) -> None:
        for event in events:
            self._event(raw, event.type, event.reason, event.message)

    def _event(self, raw: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        # The version `kubectl events --for mpijob/NAME` selects on (api/versions.py).
        meta = raw.get("metadata") or {}
        obj = {"apiVersion": PREFERRED_API_VERSION, "kind": c.KIND, "metadata": meta}
        self.recorder.record(
            obj, "Warning" if event_type == reasons.WARNING else "Normal", reason, message
        )


def mpijob_reconciler_factory(deps: ManagerDeps) -> Reconciler:
    """The `ReconcilerFactory` of `mpi-operator run`."""
    return MPIJobReconciler(deps)


__all__ = [
    "CONDITION_INVALID",
    "WATCH_SELECTORS",
    "ChildConflict",
    "MPIJobReconciler",
    "mpijob_reconciler_factory",
]
