"""Builds MPIJobs and their children *as the API server returns them* for the plan and status tests.

Children start from the operator's own builders (`desired.build`), as upstream's controller tests
do, then go through kubesim's defaulting (what the API server adds: clusterIPs, sessionAffinity,
dnsPolicy, the Job's generated selector, ...) and get server metadata (uid, resourceVersion,
creationTimestamp, managedFields). A test helper, not a test module.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubesim.admission.defaults import apply_defaults
from mpi_operator import desired, planning, status
from mpi_operator.api.models import MPIJob
from mpi_operator.planning import Observed, Plan
from mpi_operator.settings import GangScheduler, Settings

JOB_UID = "5d0c2a8e-0000-4000-8000-00000000000a"
NOW = datetime(2026, 11, 25, 22, 0, 0, tzinfo=UTC)
EARLIER = "2026-11-25T21:00:00Z"
LATER = "2026-11-25T23:00:00Z"
KEYS = desired.generate_ssh_keys()
_versions = itertools.count(1000)


def make_job(
    name: str = "test",
    namespace: str = "default",
    *,
    workers: int | None = 2,
    status: Mapping[str, Any] | None = None,
    generation: int = 1,
    worker_template: dict[str, Any] | None = None,
    launcher_template: dict[str, Any] | None = None,
    **spec: Any,
) -> MPIJob:
    """A canonical, defaulted MPIJob; `spec` takes camelCase v2beta1 fields (`runPolicy={...}`)."""
    container = {"name": "main", "image": "mpioperator/mpi-pi:openmpi"}
    replica_specs: dict[str, Any] = {
        "Launcher": {"template": launcher_template or {"spec": {"containers": [dict(container)]}}}
    }
    if workers is not None:
        replica_specs["Worker"] = {
            "replicas": workers,
            "template": worker_template or {"spec": {"containers": [dict(container)]}},
        }
    raw: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": JOB_UID,
            "generation": generation,
        },
        "spec": {"mpiReplicaSpecs": replica_specs, **copy.deepcopy(spec)},
    }
    if status is not None:
        raw["status"] = copy.deepcopy(dict(status))
    return MPIJob.model_validate(raw)


def with_status(job: MPIJob, new_status: Mapping[str, Any]) -> MPIJob:
    """The job as the API server holds it after a status write."""
    raw = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["status"] = copy.deepcopy(dict(new_status))
    return MPIJob.model_validate(raw)


def with_spec(job: MPIJob, **changes: Any) -> MPIJob:
    """The job after a spec change (`runPolicy={...}`, `workers=N`); generation bumped."""
    raw = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    if "workers" in changes:
        raw["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = changes.pop("workers")
    for key, value in changes.items():
        current = raw["spec"].get(key)
        raw["spec"][key] = {**current, **value} if isinstance(current, dict) else value
    raw["metadata"]["generation"] += 1
    return MPIJob.model_validate(raw)


def build(
    job: MPIJob,
    observed: Observed | None = None,
    *,
    gang: GangScheduler | None = None,
    cluster_domain: str = "",
) -> desired.DesiredState:
    pods = list((observed or Observed()).worker_pods)
    settings = Settings(gang_scheduling=gang, cluster_domain=cluster_domain)
    return desired.build(job, observed_pods=pods, settings=settings, ssh_keys=KEYS)


def served(obj: Mapping[str, Any], *, drop_type_meta: bool = True) -> dict[str, Any]:
    """`obj` as GET/LIST would return it after a create: defaulted, with server metadata."""
    out = copy.deepcopy(dict(obj))
    kind = str(out.get("kind"))
    meta = out.setdefault("metadata", {})
    meta.setdefault("uid", f"uid-{kind.lower()}-{meta.get('name')}")
    meta["resourceVersion"] = str(next(_versions))
    meta.setdefault("creationTimestamp", EARLIER)
    meta["managedFields"] = [{"manager": "mpi-operator", "operation": "Update", "apiVersion": "v1"}]
    apply_defaults(kind, out, None, create=True)
    if kind == "PodGroup":
        out["status"] = {"phase": "Running"}
    if drop_type_meta:  # LIST items carry no apiVersion/kind
        out.pop("apiVersion", None)
        out.pop("kind", None)
    return out


def pod_status(
    phase: str, *, ready: bool = False, reason: str = "", message: str = ""
) -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if phase == "Running":
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    out: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "BestEffort"}
    if phase in ("Running", "Pending"):
        out["podIP"] = "10.0.0.7"
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def worker(
    job: MPIJob,
    index: int,
    phase: str = "Running",
    *,
    ready: bool = True,
    reason: str = "",
    terminating: bool = False,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    """An observed worker pod built by the operator's own builder."""
    pod = served(desired.workers.build_worker(job, index))
    pod["status"] = pod_status(phase, ready=ready, reason=reason)
    pod["spec"]["nodeName"] = f"node-{index}"
    if terminating:
        pod["metadata"]["deletionTimestamp"] = LATER
    if owner_uid is not None:
        pod["metadata"]["ownerReferences"][0]["uid"] = owner_uid
    return pod


def workers(job: MPIJob, count: int, phase: str = "Running", **kwargs: Any) -> list[dict[str, Any]]:
    return [worker(job, i, phase, **kwargs) for i in range(count)]


def launcher_job(
    job: MPIJob,
    *,
    condition: str | None = None,
    reason: str = "",
    message: str = "",
    failed: int = 0,
    completion_time: str | None = None,
    start_time: str | None = EARLIER,
    suspend: bool | None = None,
    gang: GangScheduler | None = None,
) -> dict[str, Any]:
    """The launcher Job as the API server and the Job controller would show it."""
    obj = served(desired.launcher.build_launcher_job(job, gang=gang))
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    job_status: dict[str, Any] = {}
    if start_time is not None:
        job_status["startTime"] = start_time
    if failed:
        job_status["failed"] = failed
    if condition is not None:
        cond = {"type": condition, "status": "True"}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        job_status["conditions"] = [cond]
    if completion_time is not None:
        job_status["completionTime"] = completion_time
    obj["status"] = job_status
    return obj


def launcher_pod(
    launcher: Mapping[str, Any],
    phase: str = "Running",
    *,
    reason: str = "",
    message: str = "",
    created: str = EARLIER,
    suffix: str = "abcde",
) -> dict[str, Any]:
    """A pod of the launcher Job (upstream `mockJobPod`)."""
    name = launcher["metadata"]["name"]
    template = copy.deepcopy(launcher["spec"]["template"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": f"{name}-{suffix}",
            "namespace": launcher["metadata"]["namespace"],
            "creationTimestamp": created,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": launcher["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    out = served(pod)
    out["metadata"]["creationTimestamp"] = created
    out["status"] = pod_status(phase, ready=phase == "Running", reason=reason, message=message)
    return out


def converged(
    job: MPIJob,
    *,
    worker_pods: Iterable[dict[str, Any]] | None = None,
    launcher: dict[str, Any] | None = None,
    launcher_pods: Iterable[dict[str, Any]] | None = None,
    gang: GangScheduler | None = None,
) -> Observed:
    """A job whose children all exist as the operator wants them (workers Running and Ready)."""
    replicas = (
        job.worker.replicas if job.worker is not None and not job.spec.run_policy.suspend else 0
    )
    pods = list(worker_pods) if worker_pods is not None else workers(job, replicas)
    launcher = launcher if launcher is not None else launcher_job(job, gang=gang)
    first = build(job, Observed(worker_pods=pods), gang=gang)
    return Observed(
        service=served(first.service),
        config_map=served(first.config_map),
        secret=served(first.secret or {}),
        launcher_job=launcher,
        launcher_pods=tuple(
            launcher_pods if launcher_pods is not None else [launcher_pod(launcher)]
        ),
        worker_pods=tuple(pods),
        pod_group=served(first.pod_group) if first.pod_group is not None else None,
        pdb=served(first.pdb) if first.pdb is not None else None,
    )


def plan_for(
    job: MPIJob, observed: Observed, *, gang: GangScheduler | None = None, **kwargs: Any
) -> Plan:
    return planning.plan(build(job, observed, gang=gang), observed, job=job, gang=gang, **kwargs)


def sync(
    job: MPIJob, observed: Observed, *, now: datetime = NOW, gang: GangScheduler | None = None
) -> tuple[Plan, status.StatusUpdate]:
    """One reconcile, as the controller strings the pure steps together: plan, apply, status."""
    the_plan = plan_for(job, observed, gang=gang)
    after = planning.observed_after(observed, the_plan)
    return the_plan, status.compute_status(job, after, now=now)


def steps(the_plan: Plan) -> list[str]:
    return the_plan.describe()


def condition_summary(st: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", "")) for c in st.get("conditions", [])]
