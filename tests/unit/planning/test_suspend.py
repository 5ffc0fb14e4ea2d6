"""runPolicy.suspend: created suspended, suspended while running, resumed
(TestCreateSuspendedMPIJob, TestSuspendedRunningMPIJob, TestResumeMPIJob*,
TestMPIJobResumingAndSuspending)."""

from __future__ import annotations

import copy

import pytest

from mpi_operator import planning
from mpi_operator.planning import Create, Observed, Update, UpdateStatus

from .factory import (
    EARLIER,
    NOW,
    condition_summary,
    converged,
    launcher_job,
    launcher_pod,
    make_job,
    plan_for,
    steps,
    sync,
    with_spec,
    with_status,
    worker,
)

RUNNING_STATUS = {
    "conditions": [
        {
            "type": "Created",
            "status": "True",
            "reason": "MPIJobCreated",
            "message": "MPIJob default/test is created.",
        },
        {
            "type": "Running",
            "status": "True",
            "reason": "MPIJobRunning",
            "message": "MPIJob default/test is running.",
        },
    ],
    "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 8}},
    "startTime": EARLIER,
}
SUSPENDED_STATUS = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
        {
            "type": "Suspended",
            "status": "True",
            "reason": "MPIJobSuspended",
            "message": "MPIJob suspended",
        },
        {"type": "Running", "status": "False", "reason": "MPIJobSuspended"},
    ],
    "replicaStatuses": {"Launcher": {}, "Worker": {}},
    "startTime": EARLIER,
}


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_create_suspended_mpi_job(implementation: str) -> None:
    job = make_job(workers=8, mpiImplementation=implementation, runPolicy={"suspend": True})
    the_plan, update = sync(job, Observed())
    assert steps(the_plan) == [
        "create Service default/test",
        "create ConfigMap default/test-config",
        "create Secret default/test-ssh",
        "create Job default/test-launcher",
    ]
    launcher = the_plan.actions[-1]
    assert isinstance(launcher, Create)
    assert launcher.obj["spec"]["suspend"] is True
    assert condition_summary(update.status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Suspended", "True", "MPIJobSuspended"),
        ("Running", "False", "MPIJobSuspended"),
    ]
    assert update.status["conditions"][2]["message"] == "MPIJob default/test is suspended."
    assert update.status["conditions"][1]["message"] == "MPIJob suspended"
    assert update.status["replicaStatuses"] == {"Launcher": {}, "Worker": {}}
    assert "startTime" not in update.status
    assert [e.reason for e in update.events] == ["MPIJobCreated", "MPIJobSuspended"]


def test_suspended_running_mpi_job() -> None:
    running = make_job(workers=8, status=RUNNING_STATUS)
    observed = converged(running)
    job = with_spec(running, runPolicy={"suspend": True})
    the_plan, update = sync(job, observed)
    assert steps(the_plan) == [
        "update Job default/test-launcher (spec.suspend)",
        *(f"delete Pod default/test-worker-{i}" for i in range(8)),
    ]
    suspend = the_plan.actions[0]
    assert isinstance(suspend, Update)
    assert suspend.obj["spec"]["suspend"] is True
    assert observed.launcher_job is not None
    assert (
        suspend.obj["metadata"]["resourceVersion"]
        == observed.launcher_job["metadata"]["resourceVersion"]
    )
    assert observed.launcher_job["spec"]["suspend"] is False  # the cache is not touched
    assert condition_summary(update.status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Suspended", "True", "MPIJobSuspended"),
        ("Running", "False", "MPIJobSuspended"),
    ]
    # The launcher pod still runs until the Job controller removes it.
    assert update.status["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {}}
    assert update.status["startTime"] == EARLIER  # reset on resume, not on suspend
    assert [e.reason for e in update.events] == ["MPIJobSuspended"]


def test_suspend_deletes_pod_group_and_follows_clean_pod_policy() -> None:
    running = make_job(workers=3, runPolicy={"cleanPodPolicy": "Running"}, status=RUNNING_STATUS)
    pods = [worker(running, 0), worker(running, 1, "Failed"), worker(running, 2, "Succeeded")]
    observed = converged(running, worker_pods=pods, gang="volcano")
    job = with_spec(running, runPolicy={"suspend": True})
    the_plan = plan_for(job, observed, gang="volcano")
    assert steps(the_plan) == [
        "update Job default/test-launcher (spec.suspend)",
        "delete Pod default/test-worker-0",
        "delete PodGroup default/test",
    ]


def test_resume_mpi_job() -> None:
    """Resume with the Service missing: Service and 8 workers created, the Job resumed; startTime =
    now."""
    job = make_job(workers=8, runPolicy={"suspend": True}, status=SUSPENDED_STATUS)
    suspended_launcher = launcher_job(job, suspend=True, start_time=None)
    observed = converged(job, worker_pods=[], launcher=suspended_launcher, launcher_pods=[])
    observed = Observed(**{**observed.__dict__, "service": None})
    resumed = with_spec(job, runPolicy={"suspend": False})
    the_plan, update = sync(resumed, observed)
    assert steps(the_plan) == [
        "create Service default/test",
        *(f"create Pod default/test-worker-{i}" for i in range(8)),
        "update Job default/test-launcher (spec.suspend, spec.template)",
    ]
    resume = the_plan.actions[-1]
    assert isinstance(resume, Update)
    assert resume.obj["spec"]["suspend"] is False
    assert not resume.after_previous_write
    assert update.status["startTime"] == "2026-11-25T22:00:00Z"
    assert ("Suspended", "False", "MPIJobResumed") in condition_summary(update.status)
    assert [e.reason for e in update.events] == ["MPIJobResumed"]
    assert update.status["observedGeneration"] == 2


def test_resume_mpi_job_clears_start_time() -> None:
    """A suspended Job that had started: its status.startTime is cleared first (template
    immutable)."""
    job = make_job(workers=1, status=SUSPENDED_STATUS)
    launcher = launcher_job(job, suspend=True, start_time=EARLIER)
    observed = converged(job, launcher=launcher, launcher_pods=[])
    the_plan = plan_for(job, observed)
    assert steps(the_plan) == [
        "update Job default/test-launcher status (status.startTime)",
        "update Job default/test-launcher (spec.suspend, spec.template)",
    ]
    clear, resume = the_plan.actions
    assert isinstance(clear, UpdateStatus)
    assert "startTime" not in clear.obj["status"]
    assert isinstance(resume, Update)
    assert resume.after_previous_write
    after = planning.observed_after(observed, the_plan)
    assert after.launcher_job is not None
    assert "startTime" not in after.launcher_job["status"]
    assert after.launcher_job["spec"]["suspend"] is False
    assert plan_for(job, after).empty


def test_resume_mpi_job_with_existing_launcher() -> None:
    """Kueue-injected directives on the MPIJob's launcher template reach the Job on resume; labels
    and annotations are merged (ours win), nodeSelector / tolerations / schedulingGates replaced."""
    job = make_job(workers=1, runPolicy={"suspend": True}, status=SUSPENDED_STATUS)
    launcher = launcher_job(job, suspend=True, start_time=None)
    template = launcher["spec"]["template"]
    template["metadata"]["labels"]["from-job-controller"] = "kept"
    template["spec"]["nodeSelector"] = {"old": "zone"}
    template["spec"]["tolerations"] = [{"key": "old", "operator": "Exists"}]
    observed = converged(job, worker_pods=[], launcher=launcher, launcher_pods=[])

    kueue = {
        "metadata": {
            "labels": {"kueue.x-k8s.io/podset": "launcher"},
            "annotations": {"kueue": "yes"},
        },
        "spec": {
            "containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}],
            "nodeSelector": {"cloud.google.com/gke-nodepool": "a100"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
        },
    }
    resumed = make_job(workers=1, launcher_template=kueue, status=SUSPENDED_STATUS)
    resume = plan_for(resumed, observed).actions[-1]
    assert isinstance(resume, Update)
    pod_template = resume.obj["spec"]["template"]
    assert pod_template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "launcher"
    assert pod_template["metadata"]["labels"]["from-job-controller"] == "kept"
    assert pod_template["metadata"]["annotations"] == {"kueue": "yes"}
    assert pod_template["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "a100"}
    assert pod_template["spec"]["tolerations"] == kueue["spec"]["tolerations"]
    assert pod_template["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    # Everything else about the Job (its generated selector, the container) is left as the server
    # has it.
    assert resume.obj["spec"]["selector"] == observed.launcher_job["spec"]["selector"]  # type: ignore[index]
    assert pod_template["spec"]["containers"] == launcher["spec"]["template"]["spec"]["containers"]


def test_resume_removes_directives_the_job_no_longer_has() -> None:
    job = make_job(workers=1, status=SUSPENDED_STATUS)
    launcher = launcher_job(job, suspend=True, start_time=None)
    launcher["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "gone"}]
    resume = plan_for(job, converged(job, launcher=launcher, launcher_pods=[])).actions[-1]
    assert isinstance(resume, Update)
    assert "schedulingGates" not in resume.obj["spec"]["template"]["spec"]


def test_unsuspend_launcher_update_failure_does_not_poison_cache() -> None:
    """The planned Update is a copy: if it fails, the cached Job still says suspend=true, so the
    next sync plans the same resume again."""
    job = make_job(workers=1, status=SUSPENDED_STATUS)
    launcher = launcher_job(job, suspend=True, start_time=None)
    observed = converged(job, launcher=launcher, launcher_pods=[])
    snapshot = copy.deepcopy(observed)
    first = plan_for(job, observed)
    assert observed == snapshot
    assert steps(plan_for(job, observed)) == steps(first)


def test_suspend_resume_cycle_converges() -> None:
    """TestMPIJobResumingAndSuspending: running -> suspend -> resume, each step settling to zero
    writes."""
    job = make_job(workers=2, status=RUNNING_STATUS)
    observed = converged(job, launcher_pods=[launcher_pod(launcher_job(job))])
    for suspend in (True, False):
        job = with_spec(job, runPolicy={"suspend": suspend})
        for _ in range(3):
            the_plan, update = sync(job, observed, now=NOW)
            observed = planning.observed_after(observed, the_plan)
            job = with_status(job, update.status)
        final_plan, final = sync(job, observed)
        assert final_plan.empty, steps(final_plan)
        assert not final.changed
        assert len(observed.worker_pods) == (0 if suspend else 2)
        assert observed.launcher_job is not None
        assert observed.launcher_job["spec"]["suspend"] is suspend
    assert not any(
        w.get("status") for w in observed.worker_pods
    )  # fresh pods, not re-templated old ones
