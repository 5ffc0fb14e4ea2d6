"""A fresh MPIJob: what the first syncs create, in upstream's order (TestAllResourcesCreated &
co)."""

from __future__ import annotations

import pytest

from mpi_operator import planning
from mpi_operator.planning import Create, ElasticWrites, Observed

from .factory import (
    NOW,
    build,
    converged,
    make_job,
    plan_for,
    served,
    steps,
    sync,
    worker,
    workers,
)


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_all_resources_created(implementation: str) -> None:
    job = make_job(
        "foo", workers=5, mpiImplementation=implementation, launcherCreationPolicy="AtStartup"
    )
    the_plan, update = sync(job, Observed())

    assert steps(the_plan) == [
        "create Service default/foo",
        "create ConfigMap default/foo-config",
        "create Secret default/foo-ssh",
        *(f"create Pod default/foo-worker-{i}" for i in range(5)),
        "create Job default/foo-launcher",
    ]
    assert all(isinstance(a, Create) for a in the_plan.actions)
    # Created objects are exactly the builders' (upstream builds its expectations the same way).
    expected = build(job)
    objects = [a.obj for a in the_plan.actions if isinstance(a, Create)]
    assert objects[1]["data"] == expected.config_map["data"]
    assert objects[1]["data"]["discover_hosts.sh"] == "#!/bin/sh\n"
    assert objects[-1] == expected.launcher_job
    assert objects[3:8] == [expected.workers[i] for i in range(5)]

    assert update.changed
    assert update.status["conditions"] == [
        {
            "type": "Created",
            "status": "True",
            "reason": "MPIJobCreated",
            "message": "MPIJob default/foo is created.",
            "lastUpdateTime": "2026-11-25T22:00:00Z",
            "lastTransitionTime": "2026-11-25T22:00:00Z",
        }
    ]
    assert update.status["replicaStatuses"] == {
        "Launcher": {},
        "Worker": {
            "selector": "training.kubeflow.org/job-name=foo,training.kubeflow.org/job-role=worker,"
            "training.kubeflow.org/operator-name=mpi-operator"
        },
    }
    assert update.status["startTime"] == "2026-11-25T22:00:00Z"
    assert [(e.type, e.reason, e.message) for e in update.events] == [
        ("Normal", "MPIJobCreated", "MPIJob default/foo is created.")
    ]
    assert update.counters == ("created",)


def test_mpi_job_wait_workers() -> None:
    """WaitForWorkersReady (our default): no launcher Job until every worker is Ready."""
    job = make_job(workers=2)
    first, update = sync(job, Observed())
    assert "create Job default/test-launcher" not in steps(first)
    assert first.waiting_for_workers
    assert "Launcher" not in update.status["replicaStatuses"]

    not_ready = converged(job, worker_pods=workers(job, 2, ready=False))
    not_ready = Observed(**{**not_ready.__dict__, "launcher_job": None, "launcher_pods": ()})
    still, update = sync(job, not_ready)
    assert still.empty
    assert still.waiting_for_workers
    assert update.status["replicaStatuses"]["Worker"]["active"] == 2
    assert "Launcher" not in update.status["replicaStatuses"]

    ready = Observed(**{**not_ready.__dict__, "worker_pods": tuple(workers(job, 2, ready=True))})
    ready = Observed(**{**ready.__dict__, "config_map": served(build(job, ready).config_map)})
    go, update = sync(job, ready)
    assert steps(go) == ["create Job default/test-launcher"]
    assert update.status["replicaStatuses"]["Launcher"] == {}
    assert update.status["replicaStatuses"]["Worker"]["active"] == 2


def test_worker_ready() -> None:
    """16 Running workers and no launcher: the Job is created; no Running condition yet."""
    job = make_job(workers=16, launcherCreationPolicy="AtStartup")
    observed = converged(job)
    observed = Observed(**{**observed.__dict__, "launcher_job": None, "launcher_pods": ()})
    the_plan, update = sync(job, observed)
    assert steps(the_plan) == ["create Job default/test-launcher"]
    assert update.status["replicaStatuses"]["Launcher"] == {}
    assert update.status["replicaStatuses"]["Worker"]["active"] == 16
    assert [c["type"] for c in update.status["conditions"]] == ["Created"]


@pytest.mark.parametrize(
    ("threshold", "ready", "creates"),
    [(None, 3, False), (None, 4, True), (2, 1, False), (2, 2, True)],
    ids=["all-of-4-missing-one", "all-of-4", "min-2-has-1", "min-2-has-2"],
)
def test_launcher_ready_threshold(threshold: int | None, ready: int, creates: bool) -> None:
    job = make_job(workers=4)
    pods = [worker(job, i, ready=i < ready) for i in range(4)]
    observed = Observed(worker_pods=tuple(pods))
    elastic = ElasticWrites(launcher_ready_workers=threshold) if threshold is not None else None
    the_plan = plan_for(job, observed, elastic=elastic)
    assert ("create Job default/test-launcher" in steps(the_plan)) is creates
    assert the_plan.waiting_for_workers is not creates


def test_terminating_ready_worker_does_not_count_as_ready() -> None:
    job = make_job(workers=2)
    pods = [worker(job, 0), worker(job, 1, terminating=True)]
    assert plan_for(job, Observed(worker_pods=tuple(pods))).waiting_for_workers


def test_launcher_deleted_externally_is_recreated() -> None:
    job = make_job(workers=2)
    observed = converged(job)
    observed = Observed(**{**observed.__dict__, "launcher_job": None, "launcher_pods": ()})
    assert steps(plan_for(job, observed)) == ["create Job default/test-launcher"]


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins"])
def test_pod_group_created_before_workers(gang: str) -> None:
    job = make_job(workers=2, launcherCreationPolicy="AtStartup")
    the_plan = plan_for(job, Observed(), gang=gang)  # type: ignore[arg-type]
    assert steps(the_plan) == [
        "create Service default/test",
        "create ConfigMap default/test-config",
        "create Secret default/test-ssh",
        "create PodGroup default/test",
        "create Pod default/test-worker-0",
        "create Pod default/test-worker-1",
        "create Job default/test-launcher",
    ]


@pytest.mark.parametrize(
    ("gang", "change", "field"),
    [
        ("scheduler-plugins", {"scheduleTimeoutSeconds": 10}, "spec.scheduleTimeoutSeconds"),
        ("volcano", {"minAvailable": 2}, "spec.minMember"),
        ("volcano", {"queue": "research"}, "spec.queue"),
        ("volcano", {"minResources": {"cpu": "3"}}, "spec.minResources"),
    ],
    ids=[
        "scheduler-plugins-timeout",
        "volcano-min-available",
        "volcano-queue",
        "volcano-min-resources",
    ],
)
def test_pod_group_spec_propagates(gang: str, change: dict[str, object], field: str) -> None:
    """TestMPIJobWithSchedulerPlugins / TestMPIJobWithVolcanoScheduler: a policy edit updates the
    PG."""
    before = make_job(
        workers=2,
        runPolicy={"schedulingPolicy": {"scheduleTimeoutSeconds": 900}},
        launcherCreationPolicy="AtStartup",  # upstream's: minMember workers + 1
    )
    observed = converged(before, gang=gang)  # type: ignore[arg-type]
    assert plan_for(before, observed, gang=gang).empty  # type: ignore[arg-type]
    after = make_job(
        workers=2,
        runPolicy={"schedulingPolicy": {"scheduleTimeoutSeconds": 900, **change}},
        launcherCreationPolicy="AtStartup",
    )
    the_plan = plan_for(after, observed, gang=gang)  # type: ignore[arg-type]
    assert steps(the_plan) == [f"update PodGroup default/test ({field})"]
    update = the_plan.actions[0]
    assert isinstance(update, planning.Update)
    assert (
        update.obj["metadata"]["resourceVersion"]
        == observed.pod_group["metadata"]["resourceVersion"]
    )  # type: ignore[index]
    assert update.obj["spec"] == build(after, observed, gang=gang).pod_group["spec"]  # type: ignore[arg-type,index]


def test_volcano_default_queue_is_not_fought() -> None:
    """Volcano's webhook sets queue `default` when we leave it empty; that is not drift."""
    job = make_job(workers=2)
    observed = converged(job, gang="volcano")
    assert observed.pod_group is not None
    observed.pod_group["spec"]["queue"] = "default"
    assert plan_for(job, observed, gang="volcano").empty


def test_do_nothing_with_deleting_job() -> None:
    job = make_job(workers=2)
    raw = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["metadata"]["deletionTimestamp"] = "2026-11-25T22:00:00Z"
    deleting = type(job).model_validate(raw)
    assert plan_for(deleting, Observed()).empty


def test_secret_without_keys_is_a_caller_error() -> None:
    job = make_job(workers=1)
    without_keys = build(job)
    without_keys = type(without_keys)(**{**without_keys.__dict__, "secret": None})
    assert planning.secret_needs_keys(None)
    with pytest.raises(ValueError, match="needs a key pair"):
        planning.plan(without_keys, Observed(), job=job)


def test_status_of_first_sync_uses_the_injected_clock() -> None:
    job = make_job(workers=1)
    _, update = sync(job, Observed(), now=NOW.replace(microsecond=999_999))
    assert update.status["startTime"] == "2026-11-25T22:00:00Z"


@pytest.mark.parametrize(
    ("template_policy", "events"),
    [(None, []), ("Always", [("Warning", "SetPodTemplateRestartPolicy")])],
    ids=["unset", "set-in-template"],
)
def test_set_pod_template_restart_policy_event(
    template_policy: str | None, events: list[tuple[str, str]]
) -> None:
    """Upstream warns whenever it builds the launcher template over a template-level
    restartPolicy."""
    spec: dict[str, object] = {
        "containers": [{"name": "main", "image": "mpioperator/mpi-pi:openmpi"}]
    }
    if template_policy:
        spec["restartPolicy"] = template_policy
    job = make_job(
        workers=1,
        launcherCreationPolicy="AtStartup",
        launcher_template={"spec": spec},
        worker_template=SSH_PORT_DECLARED,
    )
    the_plan = plan_for(job, Observed())
    assert [(e.type, e.reason) for e in the_plan.events] == events
    if events:
        assert the_plan.events[0].message == (
            "Restart policy in pod template overridden by restart policy in replica spec"
        )
    assert plan_for(job, converged(job)).events == ()  # not rebuilt once the Job exists


SSH_PORT_DECLARED = {
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "mpioperator/mpi-pi:openmpi",
                "ports": [{"name": "ssh", "containerPort": 2222}],
            }
        ]
    }
}
SSH_PORT_UNKNOWN = ("Warning", "SSHPortUnknown")


@pytest.mark.parametrize("policy", ["AtStartup", "WaitForWorkersReady"])
def test_ssh_port_unknown_warning_comes_once_with_the_launcher(policy: str) -> None:
    """Workers with no probe (no ssh port in their spec): one Warning, when the plan creates the
    launcher Job, which happens once per job; never on later syncs, never while waiting for
    workers."""
    job = make_job(workers=2, launcherCreationPolicy=policy)
    first = plan_for(job, Observed())
    if policy == "WaitForWorkersReady":
        assert first.waiting_for_workers
        assert first.events == ()
        ready = Observed(worker_pods=tuple(workers(job, 2, ready=True)))
        first = plan_for(job, ready)
    assert "create Job default/test-launcher" in steps(first)
    assert [(e.type, e.reason) for e in first.events] == [SSH_PORT_UNKNOWN]
    message = first.events[0].message
    assert "ports: [{name: ssh, containerPort: 2222}]" in message
    assert "readinessProbe" in message
    assert "Ready does not mean that sshd answers" in message
    assert plan_for(job, converged(job)).events == ()


@pytest.mark.parametrize(
    "worker_template",
    [
        SSH_PORT_DECLARED,
        {
            "spec": {
                "containers": [
                    {"name": "main", "image": "i", "command": ["/usr/sbin/sshd", "-D", "-p2222"]}
                ]
            }
        },
        {
            "spec": {
                "containers": [
                    {"name": "main", "image": "i", "readinessProbe": {"exec": {"command": ["x"]}}}
                ]
            }
        },
    ],
    ids=["named-port", "port-on-the-command-line", "own-probe"],
)
def test_no_ssh_port_warning_when_the_workers_are_probed(
    worker_template: dict[str, object],
) -> None:
    job = make_job(workers=2, launcherCreationPolicy="AtStartup", worker_template=worker_template)
    assert plan_for(job, Observed()).events == ()


def test_no_ssh_port_warning_without_workers() -> None:
    job = make_job(workers=None, launcherCreationPolicy="AtStartup", runLauncherAsWorker=True)
    the_plan = plan_for(job, Observed())
    assert "create Job default/test-launcher" in steps(the_plan)
    assert the_plan.events == ()


def test_actions_never_show_secret_data() -> None:
    job = make_job(workers=1)
    the_plan = plan_for(job, Observed())
    secret = next(a for a in the_plan.actions if a.ref.kind == "Secret")
    assert isinstance(secret, Create)
    private = secret.obj["data"]["ssh-privatekey"]
    assert private not in repr(secret)
    assert private not in repr(the_plan)
    assert secret.describe() == "create Secret default/test-ssh"
