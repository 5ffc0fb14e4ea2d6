"""Which writes of a static job only report progress, and whether its pods are still on the move.

Upstream writes a status and a ConfigMap (one more host in `discover_hosts.sh`) per pod that becomes
Running or Ready: about a dozen writes for 8 workers, each soon superseded. The controller holds
such *progress* writes back while the pods are still starting (`settled` is False), for at most a
batch period since the job's last one, as Kubernetes' Job controller batches its status. Never held
back: a first status, conditions other than Running turning True, failures, a hostfile change, and
anything of an elastic job (its discovery has its own pacing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config
from mpi_operator.objects import (
    POD_FAILED,
    POD_RUNNING,
    POD_SUCCEEDED,
    is_job_finished,
    is_pod_ready,
    is_terminating,
    pod_phase,
)
from mpi_operator.planning.actions import Plan, Update
from mpi_operator.planning.observed import Observed, launcher_pods_of, workers_by_index

_DONE = (POD_SUCCEEDED, POD_FAILED)


def _pod_settled(pod: Mapping[str, Any], *, need_ready: bool) -> bool:
    phase = pod_phase(pod)
    if phase in _DONE:
        return True
    if is_terminating(pod) or phase != POD_RUNNING:
        return False
    return is_pod_ready(pod) or not need_ready


def settled(job: MPIJob, observed: Observed) -> bool:
    """No pod of the job is on its way to Running/Ready: every desired worker is Ready (or
    finished), and a launcher Job that has not finished has a Running (or finished) pod. Pass the
    children as they are after this sync's plan (`observed_after`), so pods just created count as
    starting."""
    if job.spec.run_policy.suspend:
        return True
    launcher = observed.launcher_job
    if launcher is not None and is_job_finished(launcher):
        return True
    workers = workers_by_index(job, observed)
    for index in range(config.worker_replicas(job)):
        pod = workers.get(index)
        if pod is None or not _pod_settled(pod, need_ready=True):
            return False
    if launcher is None:
        return True
    pods = launcher_pods_of(launcher, observed.launcher_pods)
    return bool(pods) and all(_pod_settled(pod, need_ready=False) for pod in pods)


def _data(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    data = obj.get("data")
    return data if isinstance(data, Mapping) else {}


def _is_discovery_refresh(update: Update, observed: Mapping[str, Any] | None) -> bool:
    """The ConfigMap update changes `discover_hosts.sh` only (`hostfile` and annotations as they
    are)."""
    if observed is None or update.ref.kind != "ConfigMap" or update.fields != ("data",):
        return False
    have, want = _data(observed), _data(update.obj)
    others = (set(have) | set(want)) - {config.DISCOVER_HOSTS_KEY}
    return all(have.get(key) == want.get(key) for key in others)


def without_discovery_refresh(plan: Plan, observed: Observed) -> tuple[Plan, bool]:
    """The plan without an update of the ConfigMap that only refreshes `discover_hosts.sh` (a static
    job's readiness progress), and whether it had one."""
    kept = tuple(
        action
        for action in plan.actions
        if not (isinstance(action, Update) and _is_discovery_refresh(action, observed.config_map))
    )
    if len(kept) == len(plan.actions):
        return plan, False
    return dataclasses.replace(plan, actions=kept), True
