"""Zero writes at steady state: a converged job, read back with the API server's defaults, plans
nothing, and planning is idempotent (what a plan leaves behind needs no further plan)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpi_operator import planning, status
from mpi_operator.api.models import MPIJob
from mpi_operator.planning import Observed
from mpi_operator.settings import GangScheduler

from .factory import (
    EARLIER,
    NOW,
    build,
    converged,
    launcher_job,
    make_job,
    plan_for,
    served,
    steps,
    sync,
    with_status,
    worker,
)

CONVERGED = [
    pytest.param({}, None, id="openmpi"),
    pytest.param({"mpiImplementation": "Intel"}, None, id="intel"),
    pytest.param({"mpiImplementation": "MPICH", "slotsPerWorker": 4}, None, id="mpich-slots"),
    pytest.param({"runLauncherAsWorker": True}, None, id="launcher-as-worker"),
    pytest.param({"launcherCreationPolicy": "AtStartup"}, None, id="at-startup"),
    pytest.param(
        {"runPolicy": {"backoffLimit": 3, "ttlSecondsAfterFinished": 60}}, None, id="run-policy"
    ),
    pytest.param({}, "volcano", id="volcano"),
    pytest.param(
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, "scheduler-plugins", id="sched"
    ),
]


def _converge_status(job: MPIJob, observed: Observed) -> MPIJob:
    """Runs syncs until the status settles and returns the job with that status stored."""
    for _ in range(5):
        _, update = sync(job, observed)
        if not update.changed:
            return job
        job = with_status(job, update.status)
    raise AssertionError("status never settled")


@pytest.mark.parametrize(("spec", "gang"), CONVERGED)
def test_converged_job_plans_nothing(spec: dict[str, Any], gang: GangScheduler | None) -> None:
    job = make_job(workers=3, **spec)
    observed = converged(job, gang=gang)
    the_plan = plan_for(job, observed, gang=gang)
    assert the_plan.empty, steps(the_plan)
    assert the_plan.excess_workers == ()

    job = _converge_status(job, observed)
    _, update = sync(job, observed, gang=gang)
    assert not update.changed
    assert update.events == ()
    assert dict(job.status.conditions[-1])["type"] == "Running"  # type: ignore[union-attr]


def test_converged_suspended_job_plans_nothing() -> None:
    job = make_job(workers=3, runPolicy={"suspend": True})
    observed = converged(job, launcher=launcher_job(job, start_time=None), launcher_pods=[])
    assert observed.launcher_job is not None
    assert observed.launcher_job["spec"]["suspend"] is True
    assert plan_for(job, observed).empty
    job = _converge_status(job, observed)
    assert not sync(job, observed)[1].changed


@pytest.mark.parametrize("policy", ["All", "Running", "None"])
def test_converged_finished_job_plans_nothing(policy: str) -> None:
    job = make_job(workers=2, runPolicy={"cleanPodPolicy": policy})
    launcher = launcher_job(job, condition="Complete", completion_time=EARLIER)
    remaining = [] if policy != "None" else [worker(job, i, "Succeeded") for i in range(2)]
    observed = converged(job, worker_pods=remaining, launcher=launcher, launcher_pods=[])
    job = _converge_status(job, observed)
    assert planning.is_completed(job)
    assert plan_for(job, observed).empty


def test_server_defaults_and_metadata_are_not_drift() -> None:
    """Everything the API server adds is outside the owned fields."""
    job = make_job(workers=1)
    observed = converged(job)
    assert observed.service is not None
    assert observed.launcher_job is not None
    assert observed.service["spec"]["sessionAffinity"] == "None"
    assert "selector" in observed.launcher_job["spec"]
    assert observed.worker_pods[0]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "apiVersion" not in observed.service  # LIST items carry no type meta
    assert plan_for(job, observed).empty


def test_user_labels_on_children_are_left_alone() -> None:
    job = make_job(workers=1)
    observed = converged(job)
    for obj in (observed.service, observed.config_map, observed.secret):
        assert obj is not None
        obj["metadata"].setdefault("labels", {})["team"] = "ml"
        obj["metadata"]["annotations"] = {"note": "mine"}
    assert plan_for(job, observed).empty


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda o: o.service["spec"]["selector"].update(extra="x"),
            "update Service default/test (spec.selector)",
        ),
        (
            lambda o: o.service["spec"].update(publishNotReadyAddresses=True),
            "update Service default/test (spec.publishNotReadyAddresses)",
        ),
        (
            lambda o: o.config_map["data"].update(extra="x"),
            "update ConfigMap default/test-config (data)",
        ),
        (
            lambda o: o.config_map["data"].update(hostfile=""),
            "update ConfigMap default/test-config (data)",
        ),
        (lambda o: o.secret["data"].pop("ssh-publickey"), "update Secret default/test-ssh (data)"),
    ],
    ids=[
        "service-selector",
        "service-publish-not-ready",
        "cm-extra-key",
        "cm-hostfile",
        "secret-keys",
    ],
)
def test_owned_field_drift_is_repaired(mutate: Any, expected: str) -> None:
    job = make_job(workers=1)
    observed = converged(job)
    before = copy.deepcopy(observed)
    mutate(observed)
    the_plan = plan_for(job, observed)
    assert steps(the_plan) == [expected]
    action = the_plan.actions[0]
    assert isinstance(action, planning.Update)
    # A copy of the observed object (server fields and resourceVersion kept), only our fields
    # replaced.
    original = next(
        obj
        for obj in (before.service, before.config_map, before.secret)
        if obj and obj["metadata"]["name"] == action.ref.name
    )
    assert action.obj["metadata"] == {
        **original["metadata"],
        "resourceVersion": action.obj["metadata"]["resourceVersion"],
    }
    assert action.obj["apiVersion"] == "v1"
    after = planning.observed_after(observed, the_plan)
    assert plan_for(job, after).empty


def test_secret_values_are_never_compared() -> None:
    job = make_job(workers=1)
    observed = converged(job)
    assert observed.secret is not None
    observed.secret["data"]["ssh-privatekey"] = "b3RoZXI="
    assert not planning.secret_needs_keys(observed.secret)
    assert plan_for(job, observed).empty


def test_plan_never_mutates_its_inputs() -> None:
    """TestUnsuspendLauncherUpdateFailureDoesNotPoisonCache: planned writes are copies."""
    job = make_job(workers=2)
    observed = converged(job)
    observed.service["spec"]["selector"]["extra"] = "x"  # type: ignore[index]
    snapshot = copy.deepcopy(observed)
    desired_state = build(job, observed)
    desired_snapshot = copy.deepcopy(desired_state)
    the_plan = planning.plan(desired_state, observed, job=job)
    assert the_plan.actions
    assert observed == snapshot
    assert desired_state == desired_snapshot


# --- idempotence ----------------------------------------------------------------------------------

_CHILDREN = ("service", "config_map", "secret", "launcher_job", "pod_group")


@st.composite
def _situations(draw: st.DrawFn) -> tuple[MPIJob, Observed, GangScheduler | None]:
    replicas = draw(st.integers(0, 4))
    gang = draw(st.sampled_from([None, "volcano", "scheduler-plugins"]))
    suspend = draw(st.booleans())
    policy = draw(st.sampled_from(["All", "Running", "None"]))
    creation = draw(st.sampled_from(["AtStartup", "WaitForWorkersReady"]))
    job = make_job(
        workers=replicas,
        runLauncherAsWorker=draw(st.booleans()),
        launcherCreationPolicy=creation,
        runPolicy={"suspend": suspend, "cleanPodPolicy": policy},
    )
    pods_job = make_job(workers=6)  # observed workers may exceed the desired count
    pods = []
    for index in draw(st.sets(st.integers(0, 5), max_size=6)):
        phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]))
        pods.append(
            worker(
                pods_job, index, phase, ready=draw(st.booleans()), terminating=draw(st.booleans())
            )
        )
    full = converged(job, worker_pods=pods, gang=gang)
    launcher_state = draw(st.sampled_from([None, "Complete", "Failed"]))
    launcher = launcher_job(
        job,
        condition=launcher_state,
        suspend=draw(st.booleans()),
        start_time=draw(st.sampled_from([None, EARLIER])),
    )
    present = {name: draw(st.booleans()) for name in _CHILDREN}
    observed = Observed(
        service=full.service if present["service"] else None,
        config_map=full.config_map if present["config_map"] else None,
        secret=full.secret if present["secret"] else None,
        launcher_job=launcher if present["launcher_job"] else None,
        worker_pods=tuple(pods),
        pod_group=full.pod_group if present["pod_group"] else None,
    )
    if draw(st.booleans()):
        finished = {
            "conditions": [
                {"type": draw(st.sampled_from(["Succeeded", "Failed"])), "status": "True"}
            ],
            "completionTime": EARLIER,
        }
        job = with_status(job, finished)
    return job, observed, gang  # type: ignore[return-value]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_situations())
def test_planning_is_idempotent(situation: tuple[MPIJob, Observed, GangScheduler | None]) -> None:
    job, observed, gang = situation
    desired_state = build(job, observed, gang=gang)
    first = planning.plan(desired_state, observed, job=job, gang=gang)
    after = planning.observed_after(observed, first)
    second = planning.plan(desired_state, after, job=job, gang=gang)
    assert second.empty, (first.describe(), second.describe())
    # compute_status never raises on whatever the plan left behind, and reports each type once.
    update = status.compute_status(job, after, now=NOW)
    types = [cond["type"] for cond in update.status.get("conditions", [])]
    assert len(types) == len(set(types))


def test_served_objects_round_trip() -> None:
    """The factory's server view is what the plan compares against: sanity of the test fixture
    itself."""
    job = make_job(workers=1)
    svc = served(build(job).service)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["clusterIPs"] == ["None"]
    assert svc["metadata"]["resourceVersion"]
