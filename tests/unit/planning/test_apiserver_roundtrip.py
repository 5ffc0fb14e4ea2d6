"""Plans applied to kubesim's in-process API server (its verbs, validation and defaulting; no HTTP,
no controllers), then planned again from what it returns: the objects are accepted, Updates carry a
usable resourceVersion, and the next plan is empty."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import builtins
from kubesim.cluster import Cluster, DeleteOptions
from kubesim.registry import ResourceType
from mpi_operator import desired, planning, status
from mpi_operator.api.models import MPIJob
from mpi_operator.planning import Create, Delete, Observed, Plan, Update, UpdateStatus
from mpi_operator.settings import Settings

from .factory import KEYS, NOW, make_job, with_spec, with_status

_TYPES: dict[str, ResourceType] = {
    "Service": builtins.SERVICES,
    "ConfigMap": builtins.CONFIGMAPS,
    "Secret": builtins.SECRETS,
    "Pod": builtins.PODS,
    "Job": builtins.JOBS,
}


def _apply(cluster: Cluster, the_plan: Plan) -> None:
    """A minimal applier: what the controller's applier does, minus retries."""
    written: dict[tuple[str, str], str] = {}
    for action in the_plan.actions:
        rt, ns, name = _TYPES[action.ref.kind], action.ref.namespace, action.ref.name
        if isinstance(action, Create):
            cluster.create(rt, ns, action.obj)
        elif isinstance(action, Update):
            body = action.obj
            if action.after_previous_write:
                body = {
                    **body,
                    "metadata": {**body["metadata"], "resourceVersion": written[(rt.kind, name)]},
                }
            out = cluster.update(rt, ns, name, body).object
            written[(rt.kind, name)] = out["metadata"]["resourceVersion"]
        elif isinstance(action, UpdateStatus):
            out = cluster.update(rt, ns, name, action.obj, subresource="status").object
            written[(rt.kind, name)] = out["metadata"]["resourceVersion"]
        elif isinstance(action, Delete):
            preconditions = {"uid": action.uid} if action.uid else None
            options = DeleteOptions(
                propagation_policy=action.propagation_policy, preconditions=preconditions
            )
            cluster.delete(rt, ns, name, options=options)


def _observe(cluster: Cluster, job: MPIJob) -> Observed:
    def get(rt: ResourceType, name: str) -> dict[str, Any] | None:
        found = [
            o for o in cluster.list(rt, job.namespace)["items"] if o["metadata"]["name"] == name
        ]
        return found[0] if found else None

    pods = cluster.list(builtins.PODS, job.namespace)["items"]
    return Observed(
        service=get(builtins.SERVICES, job.name),
        config_map=get(builtins.CONFIGMAPS, f"{job.name}-config"),
        secret=get(builtins.SECRETS, f"{job.name}-ssh"),
        launcher_job=get(builtins.JOBS, f"{job.name}-launcher"),
        worker_pods=tuple(p for p in pods if "-worker-" in p["metadata"]["name"]),
    )


def _reconcile(cluster: Cluster, job: MPIJob) -> tuple[Plan, MPIJob]:
    observed = _observe(cluster, job)
    keys = KEYS if planning.secret_needs_keys(observed.secret) else None
    state = desired.build(
        job, observed_pods=observed.worker_pods, settings=Settings(), ssh_keys=keys
    )
    the_plan = planning.plan(state, observed, job=job)
    assert not the_plan.conflicts
    _apply(cluster, the_plan)
    update = status.compute_status(job, _observe(cluster, job), now=NOW)
    return the_plan, with_status(job, update.status)


def _settle(cluster: Cluster, job: MPIJob) -> tuple[list[list[str]], MPIJob]:
    history = []
    for _ in range(4):
        the_plan, job = _reconcile(cluster, job)
        history.append(the_plan.describe())
        if the_plan.empty:
            return history, job
    raise AssertionError(f"never converged: {history}")


def _cluster() -> Cluster:
    return Cluster(now=lambda: NOW)


@pytest.mark.parametrize(
    "spec",
    [
        {"launcherCreationPolicy": "AtStartup"},
        {
            "launcherCreationPolicy": "AtStartup",
            "mpiImplementation": "Intel",
            "runLauncherAsWorker": True,
        },
        {"launcherCreationPolicy": "AtStartup", "sshAuthMountPath": "/home/mpiuser/.ssh"},
        {"runPolicy": {"suspend": True}},
    ],
    ids=["openmpi", "intel-launcher-as-worker", "non-root", "suspended"],
)
def test_fresh_job_converges_against_the_api_server(spec: dict[str, Any]) -> None:
    cluster = _cluster()
    history, _ = _settle(cluster, make_job(workers=3, **spec))
    assert len(history) == 2
    assert history[0][0] == "create Service default/test"


def test_scale_suspend_resume_against_the_api_server() -> None:
    cluster = _cluster()
    job = make_job(workers=2, launcherCreationPolicy="AtStartup")
    _, job = _settle(cluster, job)
    history, job = _settle(cluster, with_spec(job, workers=4))
    assert history[0][-2:] == [
        "create Pod default/test-worker-2",
        "create Pod default/test-worker-3",
    ]
    history, job = _settle(cluster, with_spec(job, workers=1))
    assert [s for s in history[0] if s.startswith("delete")] == [
        "delete Pod default/test-worker-3",
        "delete Pod default/test-worker-2",
        "delete Pod default/test-worker-1",
    ]
    history, job = _settle(cluster, with_spec(job, runPolicy={"suspend": True}))
    assert history[0][0] == "update Job default/test-launcher (spec.suspend)"
    history, job = _settle(cluster, with_spec(job, runPolicy={"suspend": False}))
    assert history[0][-1] == "update Job default/test-launcher (spec.suspend, spec.template)"
    assert cluster.get(builtins.JOBS, "default", "test-launcher")["spec"]["suspend"] is False
