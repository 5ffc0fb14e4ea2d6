"""`plan()`: desired vs observed children of one MPIJob -> the ordered writes of upstream's
`syncHandler`.

Pure and idempotent: a converged job, or what a plan leaves behind (`observed_after`), plans
nothing. Upstream's order: a finished job gets only its cleanPodPolicy cleanup (and loses its
PodDisruptionBudget); otherwise Service, ConfigMap, Secret, our PodDisruptionBudget, then (unless
suspended) PodGroup, workers (never re-templated, failed ones not replaced) and the launcher Job;
then `suspend` aligned, and a suspended job's workers and PodGroup deleted. Each action has a
`Phase` (docs/architecture.md#the-write-path). An object with our name that the job does not control
stops the plan there, in `Plan.conflicts`, never adopted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from mpi_operator import reasons
from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.conditions import is_finished
from mpi_operator.desired import DesiredState, config, naming, pdb, podgroup
from mpi_operator.desired import launcher as launcher_builder
from mpi_operator.desired import workers as worker_builder
from mpi_operator.desired.naming import is_controlled_by
from mpi_operator.objects import (
    POD_PENDING,
    POD_RUNNING,
    KubeObject,
    is_job_finished,
    is_job_suspended,
    is_pod_ready,
    is_terminating,
    pod_phase,
    uid_of,
)
from mpi_operator.planning import owned
from mpi_operator.planning.actions import (
    Action,
    Conflict,
    Create,
    Delete,
    ElasticWrites,
    ObjectRef,
    Phase,
    Plan,
    Update,
    UpdateStatus,
)
from mpi_operator.planning.observed import Observed, pods_by_name, workers_by_index
from mpi_operator.settings import GangScheduler


class _Stop(Exception):
    """A foreign object: upstream's sync returns an error here, so planning stops."""


_Compare = Callable[[Mapping[str, Any], Mapping[str, Any]], Update | None]
"""An `owned.*_update` function: observed, desired -> the Update of our fields, or None."""

_ELASTIC_PHASES = frozenset({Phase.DRAIN, Phase.ANNOUNCE, Phase.RELEASE, Phase.STOP})


class _Planner:
    """One planning pass; accumulates actions and stops (`_Stop`) at the first foreign object."""

    def __init__(
        self, job: MPIJob, desired: DesiredState, observed: Observed, gang: GangScheduler | None
    ) -> None:
        self.job = job
        self.gang = gang
        self.desired = desired
        self.observed = observed
        self.actions: list[Action] = []
        self.conflicts: list[Conflict] = []
        self.excess: tuple[int, ...] = ()
        self.waiting = False
        self.deferred = 0
        self.events: list[reasons.Event] = []

    def add(self, phase: Phase, action: Action) -> None:
        self.actions.append(
            action if action.phase == phase else dataclasses.replace(action, phase=phase)
        )

    def result(self, elastic: ElasticWrites | None = None) -> Plan:
        actions = self.actions
        if elastic is not None:
            stray = [a.describe() for a in elastic.actions if a.phase not in _ELASTIC_PHASES]
            if stray:
                raise ValueError(f"elastic writes outside the elastic phases: {stray}")
            actions = [*actions, *elastic.actions]
        return Plan(
            actions=tuple(
                sorted(actions, key=lambda action: action.phase)
            ),  # stable: upstream order kept
            conflicts=tuple(self.conflicts),
            excess_workers=self.excess,
            waiting_for_workers=self.waiting,
            deferred_workers=self.deferred,
            events=tuple(self.events),
            urgent=elastic is not None and elastic.urgent,
        )

    def launcher_template_built(self) -> None:
        """Upstream warns each time it builds the launcher template over a template
        restartPolicy."""
        if launcher_builder.template_sets_restart_policy(self.job):
            self.events.append(
                reasons.Event(
                    reasons.WARNING,
                    reasons.SET_POD_TEMPLATE_RESTART_POLICY,
                    reasons.RESTART_POLICY_OVERRIDDEN_MESSAGE,
                )
            )

    def worker_probe_checked(self) -> None:
        """Warns, with the launcher's creation (so once per job), that the workers have no readiness
        probe because the operator does not know their sshd port."""
        if worker_builder.ssh_port_unknown(self.job):
            self.events.append(
                reasons.Event(
                    reasons.WARNING, reasons.SSH_PORT_UNKNOWN, reasons.SSH_PORT_UNKNOWN_MESSAGE
                )
            )

    def owned_or_stop(self, obj: Mapping[str, Any], api_version: str, kind: str) -> None:
        if not is_controlled_by(obj, self.job):
            self.conflicts.append(Conflict(ObjectRef.of(obj, api_version=api_version, kind=kind)))
            raise _Stop

    def get_or_create(
        self, observed: KubeObject | None, desired: KubeObject, compare: _Compare
    ) -> None:
        """Upstream's get-or-create-or-update of a singleton child (all of them DISCOVERY)."""
        if observed is None:
            self.add(Phase.DISCOVERY, Create.of(desired))
            return
        self.owned_or_stop(observed, desired["apiVersion"], desired["kind"])
        update = compare(observed, desired)
        if update is not None:
            self.add(Phase.DISCOVERY, update)

    def delete(self, obj: Mapping[str, Any], api_version: str, kind: str) -> None:
        ref = ObjectRef.of(obj, api_version=api_version, kind=kind)
        self.add(Phase.WORKLOAD, Delete(ref=ref, uid=uid_of(obj)))

    # --- steps -----------------------------------------------------------------------------------

    def children(self, *, delete_excess_workers: bool, launcher_ready_workers: int | None) -> None:
        desired, observed = self.desired, self.observed
        self.get_or_create(observed.service, desired.service, owned.service_update)
        self.get_or_create(observed.config_map, desired.config_map, owned.config_map_update)
        self.secret()
        self.pdb()
        if not self.job.spec.run_policy.suspend:
            if desired.pod_group is not None:
                self.get_or_create(observed.pod_group, desired.pod_group, owned.pod_group_update)
            self.workers(delete_excess=delete_excess_workers)
        if observed.launcher_job is None and not self.deferred:
            self.launcher(launcher_ready_workers)

    def secret(self) -> None:
        observed = self.observed.secret
        if observed is not None:
            self.owned_or_stop(observed, "v1", "Secret")
        if not owned.secret_needs_keys(observed):
            return
        if self.desired.secret is None:
            raise ValueError(
                f"the Secret {naming.ssh_secret_name(self.job)} needs a key pair: build the "
                "desired state "
                "with ssh_keys when planning.secret_needs_keys(observed.secret)"
            )
        if observed is None:
            self.add(Phase.DISCOVERY, Create.of(self.desired.secret))
        else:
            update = owned.secret_update(observed, self.desired.secret)
            if update is not None:
                self.add(Phase.DISCOVERY, update)

    def pdb(self) -> None:
        """The workers' budget is created before them, kept to the spec, and deleted when the job
        no longer gets one (opted out, suspended, finished)."""
        desired, observed = self.desired.pdb, self.observed.pdb
        if desired is not None:
            self.get_or_create(observed, desired, owned.pdb_update)
        elif (
            observed is not None
            and is_controlled_by(observed, self.job)
            and not is_terminating(observed)
        ):
            self.delete(observed, pdb.API_VERSION, pdb.KIND)

    def workers(self, *, delete_excess: bool) -> None:
        """Upstream `getOrCreateWorker`: remove excess pods, then create the missing ones in index
        order.

        Only the missing workers the desired state holds are created (`planning.window`: a sync's
        window); the others are counted in `deferred`, and the launcher waits for them."""
        replicas = config.worker_replicas(self.job)
        own = workers_by_index(self.job, self.observed)
        self.excess = tuple(
            sorted(
                (i for i, pod in own.items() if i >= replicas and not is_terminating(pod)),
                reverse=True,
            )
        )
        if delete_excess:
            for index in self.excess:
                self.delete(own[index], "v1", "Pod")
        by_name = pods_by_name(self.observed)
        for index in range(replicas):
            existing = by_name.get(naming.worker_name(self.job, index))
            if existing is not None:
                self.owned_or_stop(existing, "v1", "Pod")
            elif index in self.desired.workers:
                self.add(Phase.WORKLOAD, Create.of(self.desired.workers[index]))
            else:
                self.deferred += 1

    def launcher(self, ready_threshold: int | None) -> None:
        """The launcher Job is created once: at once (AtStartup) or when enough workers are
        Ready."""
        job = self.job
        if job.spec.launcher_creation_policy != c.LAUNCHER_CREATION_AT_STARTUP:
            replicas = config.worker_replicas(job)
            ready = sum(
                1
                for index, pod in workers_by_index(job, self.observed).items()
                if index < replicas and is_pod_ready(pod)
            )
            # Upstream counts against the workers of this sync, none while suspended: a suspended
            # launcher is created at once.
            if job.spec.run_policy.suspend:
                needed = 0
            elif ready_threshold is not None:
                needed = ready_threshold
            else:
                needed = replicas
            if ready < needed:
                self.waiting = True
                return
        self.add(Phase.WORKLOAD, Create.of(self.desired.launcher_job))
        self.launcher_template_built()
        self.worker_probe_checked()

    def align_launcher_suspension(self, launcher: Mapping[str, Any]) -> None:
        suspended = self.job.spec.run_policy.suspend
        if suspended == is_job_suspended(launcher):
            return
        if suspended:
            self.add(Phase.WORKLOAD, owned.suspend_launcher(launcher, self.desired.launcher_job))
            return
        cleared = owned.clear_launcher_start_time(launcher)
        if cleared is not None:
            self.add(Phase.WORKLOAD, UpdateStatus.of(cleared, "status.startTime"))
        self.add(
            Phase.WORKLOAD,
            owned.resume_launcher(
                launcher, self.desired.launcher_job, after_previous_write=cleared is not None
            ),
        )

    def clean_up_workers(self, *, running_only: bool) -> None:
        """Upstream `cleanUpWorkerPods`: delete worker pods in index order, then the PodGroup.

        Unlike upstream, workers at or above the desired count are cleaned up too, and pods already
        terminating are not deleted again (a reconcile of a converged job writes nothing).
        """
        job = self.job
        replicas = config.worker_replicas(job)
        own = workers_by_index(job, self.observed)
        by_name = pods_by_name(self.observed)
        for index in sorted({*own, *range(replicas)}):
            pod = own.get(index)
            if pod is None:
                stranger = by_name.get(naming.worker_name(job, index)) if index < replicas else None
                if stranger is not None:
                    self.owned_or_stop(stranger, "v1", "Pod")
                continue
            if is_terminating(pod):
                continue
            if running_only and pod_phase(pod) not in (POD_RUNNING, POD_PENDING):
                continue  # finished pods keep their logs; Pending ones may still start, so they go
            self.delete(pod, "v1", "Pod")
        pod_group = self.observed.pod_group
        if pod_group is not None:
            api_version = str(pod_group.get("apiVersion") or "")
            if not api_version and self.gang is not None:
                # LIST items carry no apiVersion, and two PodGroup APIs exist.
                api_version = (
                    podgroup.VOLCANO_API_VERSION
                    if self.gang == podgroup.VOLCANO
                    else podgroup.SCHEDULER_PLUGINS_API_VERSION
                )
            self.owned_or_stop(pod_group, api_version, "PodGroup")
            if not is_terminating(pod_group):
                self.delete(pod_group, api_version, "PodGroup")


def is_completed(job: MPIJob) -> bool:
    """Finished *and* completionTime set: the second phase of upstream's two-phase finish."""
    return (
        is_finished(job.status)
        and job.status is not None
        and job.status.completion_time is not None
    )


def plan(
    desired: DesiredState,
    observed: Observed,
    *,
    job: MPIJob,
    elastic: ElasticWrites | None = None,
    gang: GangScheduler | None = None,
) -> Plan:
    """The writes that bring `observed` to `desired` for `job` (canonical, defaulted, valid).

    `elastic`: an elastic job's own writes, and how it changes the planner's (with `paces_scale_in`
    excess workers are only listed in `Plan.excess_workers`; `launcher_ready_workers` is how many
    Ready workers `WaitForWorkersReady` waits for instead of every desired one). `gang` is the
    operator's `--gang-scheduling` (which PodGroup API a PodGroup read without apiVersion belongs
    to).
    """
    planner = _Planner(job, desired, observed, gang)
    if job.metadata.get("deletionTimestamp") is not None:
        return planner.result()  # garbage collection removes the children
    policy = job.spec.run_policy.clean_pod_policy
    try:
        if is_completed(job):
            if policy in (c.CLEAN_POD_POLICY_ALL, c.CLEAN_POD_POLICY_RUNNING):
                planner.clean_up_workers(running_only=policy == c.CLEAN_POD_POLICY_RUNNING)
            # Workers kept by cleanPodPolicy have nothing left to protect.
            planner.desired = dataclasses.replace(planner.desired, pdb=None)
            planner.pdb()
            return planner.result(elastic)
        launcher = observed.launcher_job
        if launcher is not None:
            planner.owned_or_stop(launcher, "batch/v1", "Job")
        if launcher is None or not is_job_finished(launcher):
            planner.children(
                delete_excess_workers=elastic is None or not elastic.paces_scale_in,
                launcher_ready_workers=elastic.launcher_ready_workers
                if elastic is not None
                else None,
            )
        if launcher is not None:
            planner.align_launcher_suspension(launcher)
        if job.spec.run_policy.suspend:
            planner.clean_up_workers(running_only=policy == c.CLEAN_POD_POLICY_RUNNING)
    except _Stop:
        pass
    return planner.result(elastic)
