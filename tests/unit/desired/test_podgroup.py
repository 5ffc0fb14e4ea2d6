"""desired.podgroup: Volcano and scheduler-plugins PodGroups, minMember and minResources as
upstream (whose launcher is created at startup), and without the launcher in minMember when it
waits for the workers."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api.quantities import render_resource_list
from mpi_operator.desired import podgroup

from .factory import JOB_UID, container, make_job, template

OWNER = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "name": "test",
    "uid": JOB_UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def _tmpl(pc: str | None = None, *requests: dict[str, str]) -> dict[str, Any]:
    containers = [container(f"c{i}", resources={"requests": r}) for i, r in enumerate(requests)]
    extra = {"priorityClassName": pc} if pc else {}
    return template(*containers, **extra)


def _job(
    launcher: dict[str, Any], worker: dict[str, Any] | None, workers: int | None, **spec: Any
) -> Any:
    return make_job(
        "test",
        "ns",
        workers=workers,
        launcher_template=launcher,
        worker_template=worker,
        **{"launcherCreationPolicy": "AtStartup", **spec},
    )


@pytest.mark.parametrize(
    ("job_args", "min_member", "priority_classes", "expected"),
    [
        (
            (
                _tmpl(None, {"cpu": "2", "memory": "1Gi"}),
                _tmpl(None, {"cpu": "10", "memory": "32Gi"}),
                2,
            ),
            3,
            {},
            {"cpu": "22", "memory": "65Gi"},
        ),
        (
            (_tmpl(None, {"cpu": "2", "memory": "1Gi"}), None, None),
            1,
            {},
            {"cpu": "2", "memory": "1Gi"},
        ),
        (
            (
                _tmpl(None, {"cpu": "2", "memory": "1Gi"}),
                _tmpl(None, {"cpu": "10", "memory": "32Gi"}, {"cpu": "50", "memory": "512Gi"}),
                2,
            ),
            3,
            {},
            {"cpu": "122", "memory": "1089Gi"},
        ),
        (
            (
                _tmpl("non-existence", {"cpu": "2", "memory": "2Gi"}),
                _tmpl("non-existence", {"cpu": "5", "memory": "16Gi"}),
                2,
            ),
            2,
            {},
            {"cpu": "7", "memory": "18Gi"},
        ),
        (
            (
                _tmpl("high", {"cpu": "2", "memory": "4Gi"}),
                _tmpl("low", {"cpu": "20", "memory": "64Gi"}),
                100,
            ),
            2,
            {"high": 100_010, "low": 10_010},
            {"cpu": "22", "memory": "68Gi"},
        ),
        (
            (_tmpl("low", {"cpu": "2"}), _tmpl("high", {"cpu": "20"}), 100),
            2,
            {"high": 100_010, "low": 10_010},
            {"cpu": "2002"},
        ),
        ((_tmpl(None, {"cpu": "2"}), _tmpl(None, {"cpu": "20"}), 4), 0, {}, None),
    ],
    ids=[
        "without-priority-class",
        "without-worker",
        "multi-container",
        "non-existent-priority-class",
        "launcher-higher-priority",
        "workers-higher-priority-keep-all",
        "min-member-zero",
    ],
)
def test_min_resources(
    job_args: tuple[Any, ...],
    min_member: int,
    priority_classes: dict[str, int],
    expected: dict[str, str] | None,
) -> None:
    job = _job(*job_args)
    got = podgroup.compute_min_resources(job, min_member, priority_classes)
    assert (None if got is None else render_resource_list(got)) == expected


def test_gpus_count_in_min_resources() -> None:
    gpu_worker = template(container(resources={"limits": {"nvidia.com/gpu": 8, "cpu": "4"}}))
    job = _job(_tmpl(None, {"cpu": "1"}), gpu_worker, 3)
    got = podgroup.compute_min_resources(job, 4, {})
    assert got is not None
    assert render_resource_list(got) == {"cpu": "13", "nvidia.com/gpu": "24"}


@pytest.mark.parametrize(
    ("policy", "workers", "expected"),
    [({"minAvailable": 2}, 1000, 2), ({}, 99, 100), ({"minAvailable": 0}, 3, 0)],
    ids=["explicit", "workers-plus-one", "explicit-zero"],
)
def test_min_available(policy: dict[str, Any], workers: int, expected: int) -> None:
    job = make_job(
        workers=workers, runPolicy={"schedulingPolicy": policy}, launcherCreationPolicy="AtStartup"
    )
    assert podgroup.min_available(job) == expected


@pytest.mark.parametrize(
    ("policy_pc", "launcher_pc", "worker_pc", "expected"),
    [
        ("policy", "launcher", "worker", "policy"),
        (None, "launcher", "worker", "launcher"),
        (None, None, "worker", "worker"),
        (None, None, None, ""),
    ],
    ids=["use-scheduling-policy", "use-launcher", "use-worker", "nothing"],
)
def test_priority_class_name(
    policy_pc: str | None, launcher_pc: str | None, worker_pc: str | None, expected: str
) -> None:
    policy = {"priorityClass": policy_pc} if policy_pc else {}
    job = _job(_tmpl(launcher_pc), _tmpl(worker_pc), 1, runPolicy={"schedulingPolicy": policy})
    assert podgroup.priority_class_name(job) == expected


ALL_FIELDS = {
    "minAvailable": 2,
    "queue": "project-x",
    "priorityClass": "high",
    "scheduleTimeoutSeconds": 100,
    "minResources": {"cpu": 21, "memory": "42Gi"},
}


@pytest.mark.parametrize(
    ("gang", "policy", "annotations", "expected"),
    [
        (
            "volcano",
            ALL_FIELDS,
            {},
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "spec": {
                    "minMember": 2,
                    "queue": "project-x",
                    "priorityClassName": "high",
                    "minResources": {"cpu": "21", "memory": "42Gi"},
                },
            },
        ),
        (
            "volcano",
            None,
            {"scheduling.volcano.sh/queue-name": "from-annotation"},
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "spec": {"minMember": 3, "queue": "from-annotation", "minResources": {"cpu": "21"}},
            },
        ),
        (
            "scheduler-plugins",
            ALL_FIELDS,
            {},
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "spec": {
                    "minMember": 2,
                    "scheduleTimeoutSeconds": 100,
                    "minResources": {"cpu": "21", "memory": "42Gi"},
                },
            },
        ),
        (
            "scheduler-plugins",
            None,
            {},
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "spec": {
                    "minMember": 3,
                    "scheduleTimeoutSeconds": 0,
                    "minResources": {"cpu": "21"},
                },
            },
        ),
    ],
    ids=[
        "volcano-all-fields",
        "volcano-defaults",
        "scheduler-plugins-all-fields",
        "scheduler-plugins-defaults",
    ],
)
def test_pod_group(
    gang: Any, policy: dict[str, Any] | None, annotations: dict[str, str], expected: dict[str, Any]
) -> None:
    run_policy = {"schedulingPolicy": policy} if policy is not None else {}
    job = make_job(
        "test",
        "ns",
        workers=2,
        launcher_template=_tmpl(None, {"cpu": "1"}),
        worker_template=_tmpl(None, {"cpu": "10"}),
        annotations=annotations,
        runPolicy=run_policy,
        launcherCreationPolicy="AtStartup",
    )
    assert podgroup.build_pod_group(job, gang, {}) == {
        "apiVersion": expected["apiVersion"],
        "kind": "PodGroup",
        "metadata": {"name": "test", "namespace": "ns", "ownerReferences": [OWNER]},
        "spec": expected["spec"],
    }


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins"])
def test_a_launcher_that_waits_for_the_workers_is_outside_min_member(gang: Any) -> None:
    """`WaitForWorkersReady` creates the launcher once the workers are Ready: counting it in
    minMember would hold the workers at the gang scheduler for a pod that waits on them. The
    first gang is the workers, and minResources theirs."""

    def job_with(**spec: Any) -> Any:
        return make_job(
            "test",
            "ns",
            workers=2,
            launcher_template=_tmpl(None, {"cpu": "1"}),
            worker_template=_tmpl(None, {"cpu": "10"}),
            launcherCreationPolicy="WaitForWorkersReady",
            **spec,
        )

    job = job_with()
    assert not podgroup.launcher_in_gang(job)
    spec = podgroup.build_pod_group(job, gang, {})["spec"]
    assert (spec["minMember"], spec["minResources"]) == (2, {"cpu": "20"})
    # An upstream manifest's minAvailable of workers + 1 counts that launcher: capped.
    capped = job_with(runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    assert podgroup.build_pod_group(capped, gang, {})["spec"]["minMember"] == 2
    # An elastic job's gang of minReplicas counts that many workers, not all of them.
    got = podgroup.compute_min_resources(job, 1, {})
    assert got is not None
    assert render_resource_list(got) == {"cpu": "10"}


def test_launcher_only_job_without_resources() -> None:
    job = make_job("test", "ns", workers=None)
    assert podgroup.build_pod_group(job, "volcano")["spec"] == {"minMember": 1, "minResources": {}}
    assert podgroup.build_pod_group(job, "scheduler-plugins")["spec"] == {
        "minMember": 1,
        "scheduleTimeoutSeconds": 0,
    }


@pytest.mark.parametrize(
    ("gang", "name", "expected"),
    [
        ("volcano", podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME, "volcano"),
        (
            "scheduler-plugins",
            podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
            "scheduler-plugins-scheduler",
        ),
        ("scheduler-plugins", "my-coscheduler", "my-coscheduler"),
    ],
    ids=["volcano", "scheduler-plugins-default", "scheduler-plugins-configured"],
)
def test_decorate_pod_template(gang: Any, name: str, expected: str) -> None:
    job = make_job("test")
    tmpl: dict[str, Any] = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"schedulerName": "default-scheduler"},
    }
    podgroup.decorate_pod_template(tmpl, job, gang, name)
    assert tmpl["spec"]["schedulerName"] == expected
    if gang == "volcano":
        assert tmpl["metadata"] == {
            "labels": {"a": "b"},
            "annotations": {"scheduling.k8s.io/group-name": "test"},
        }
    else:
        assert tmpl["metadata"] == {"labels": {"a": "b", "scheduling.x-k8s.io/pod-group": "test"}}


def test_no_gang_leaves_the_template_alone() -> None:
    tmpl: dict[str, Any] = {"metadata": {}, "spec": {"schedulerName": "x"}}
    podgroup.decorate_pod_template(tmpl, make_job(), None)
    assert tmpl == {"metadata": {}, "spec": {"schedulerName": "x"}}
