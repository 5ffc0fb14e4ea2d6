"""The elastic inputs of the pure builders and planner (no cluster): host names and annotations per
worker incarnation, the launcher's bound variables, the gang size, the ConfigMap's state annotation,
and `elastic_sync.prepare` / `split_plan`. Static jobs must build exactly what they built before."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from mpi_operator import desired, planning
from mpi_operator.api.models import MPIJob
from mpi_operator.controller import elastic_sync
from mpi_operator.desired import config, podgroup, workers
from mpi_operator.elastic import STATE_ANNOTATION
from mpi_operator.planning import Observed, owned
from mpi_operator.settings import Settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(workers_: int = 2, **spec: Any) -> MPIJob:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    return MPIJob.model_validate(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "default", "uid": "u-1"},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"template": copy.deepcopy(template)},
                    "Worker": {"replicas": workers_, "template": copy.deepcopy(template)},
                },
                **copy.deepcopy(spec),
            },
        }
    )


ELASTIC = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}}


def test_worker_hostname_and_annotations_change_only_the_hostname_and_annotations() -> None:
    j = job()
    plain = workers.build_worker(j, 1)
    pod = workers.build_worker(j, 1, hostname="pi-worker-1-r2", annotations={"a": "1"})
    assert pod["spec"]["hostname"] == "pi-worker-1-r2"
    assert plain["spec"]["hostname"] == "pi-worker-1"
    assert pod["metadata"]["name"] == plain["metadata"]["name"] == "pi-worker-1"
    assert pod["metadata"]["labels"] == plain["metadata"]["labels"]
    assert pod["metadata"]["annotations"] == {"a": "1"}
    assert "annotations" not in plain["metadata"]


def test_a_static_job_builds_the_same_with_and_without_empty_elastic_inputs() -> None:
    j = job(3, slotsPerWorker=2)
    settings = Settings(gang_scheduling="volcano")
    before = desired.build(j, settings=settings)
    after = desired.build(
        j,
        settings=settings,
        worker_hostnames={},
        worker_annotations={},
        config_map_annotations={},
        launcher_extra_env=(),
        pod_group_min_member=None,
    )
    assert after == before


def test_elastic_inputs_reach_every_child() -> None:
    j = job(2, **ELASTIC)
    extra = [{"name": "MPIJOB_MIN_NP", "value": "2"}]
    state = desired.build(
        j,
        settings=Settings(gang_scheduling="volcano"),
        worker_hostnames={1: "pi-worker-1-r1"},
        worker_annotations={1: {"mpi-operator.kubeflow.org/incarnation": "1"}},
        config_map_annotations={STATE_ANNOTATION: "{}"},
        launcher_extra_env=extra,
        pod_group_min_member=3,
    )
    assert state.workers[1]["spec"]["hostname"] == "pi-worker-1-r1"
    assert state.workers[0]["spec"]["hostname"] == "pi-worker-0"
    assert state.config_map["metadata"]["annotations"] == {STATE_ANNOTATION: "{}"}
    assert "pi-worker-1-r1.pi.default.svc" in state.config_map["data"]["hostfile"]
    env = state.launcher_job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-1] == extra[0], "the bounds come after the operator's own variables"
    assert state.pod_group is not None
    assert state.pod_group["spec"]["minMember"] == 3


@pytest.mark.parametrize(
    ("min_available", "default", "want"),
    [(None, None, 5), (None, 3, 3), (2, 3, 2)],
    ids=["static-workers-plus-launcher", "elastic-min-plus-launcher", "explicit-minAvailable-wins"],
)
def test_pod_group_min_member(min_available: int | None, default: int | None, want: int) -> None:
    spec: dict[str, Any] = {}
    if min_available is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    group = podgroup.build_pod_group(job(4, **spec), "volcano", {}, min_member=default)
    assert group["spec"]["minMember"] == want


def config_map(annotations: dict[str, str] | None, data: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pi-config", "namespace": "default", "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@pytest.mark.parametrize(
    ("observed", "wanted", "fields"),
    [
        (config_map({"x": "1"}, {"k": "v"}), config_map(None, {"k": "v"}), None),
        (
            config_map({"x": "1"}, {"k": "v"}),
            config_map({STATE_ANNOTATION: "s"}, {"k": "v"}),
            ("metadata.annotations",),
        ),
        (
            config_map({STATE_ANNOTATION: "s"}, {"k": "v"}),
            config_map({STATE_ANNOTATION: "s"}, {"k": "v"}),
            None,
        ),
        (
            config_map({STATE_ANNOTATION: "s"}, {"k": "old"}),
            config_map({STATE_ANNOTATION: "t"}, {"k": "v"}),
            ("data", "metadata.annotations"),
        ),
    ],
    ids=["static-ignores-annotations", "state-added", "converged", "script-and-state"],
)
def test_config_map_comparison_includes_the_desired_annotations(
    observed: dict[str, Any], wanted: dict[str, Any], fields: tuple[str, ...] | None
) -> None:
    update = owned.config_map_update(observed, wanted)
    if fields is None:
        assert update is None
        return
    assert update is not None
    assert update.fields == fields
    annotations = update.obj["metadata"]["annotations"]
    assert annotations[STATE_ANNOTATION] == wanted["metadata"]["annotations"][STATE_ANNOTATION]
    assert annotations.get("x") == observed["metadata"].get("annotations", {}).get("x"), "others are kept"
    assert update.obj["metadata"]["resourceVersion"] == "7"


def test_prepare_is_none_for_a_static_job_and_clamps_an_elastic_one() -> None:
    assert elastic_sync.prepare(job(), Observed(), now=NOW, cluster_domain="") is None
    sync = elastic_sync.prepare(job(9, **ELASTIC), Observed(), now=NOW, cluster_domain="")
    assert sync is not None
    assert sync.decision is not None
    assert config.worker_replicas(sync.job) == 4
    assert sync.decision.status["desired"] == 4
    assert [e.reason for e in sync.decision.events] == ["ReplicasOutOfBounds"]
    env = {e["name"]: e["value"] for e in sync.build_overrides["launcher_extra_env"]}
    assert (env["MPIJOB_MIN_NP"], env["MPIJOB_MAX_NP"]) == ("2", "4")
    assert sync.build_overrides["pod_group_min_member"] == 3
    assert set(sync.build_overrides["worker_hostnames"]) == {0, 1, 2, 3}


def test_prepare_lists_no_host_while_suspended() -> None:
    sync = elastic_sync.prepare(
        job(2, runPolicy={"suspend": True}, **ELASTIC), Observed(), now=NOW, cluster_domain=""
    )
    assert sync is not None
    assert sync.decision is not None
    assert sync.build_overrides["discovered"] == []
    assert sync.decision.status["discovered"] == 0
    assert sync.launcher_stop is None


def test_prepare_runs_no_step_once_finished() -> None:
    raw = job(2, **ELASTIC).model_dump(by_alias=True, exclude_none=True, mode="json")
    finished = MPIJob.model_validate(
        {**raw, "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}
    )
    sync = elastic_sync.prepare(finished, Observed(), now=NOW, cluster_domain="")
    assert sync is not None
    assert sync.decision is None
    assert "discovered" not in sync.build_overrides


def test_split_plan_puts_the_script_before_pods_and_the_launcher() -> None:
    j = job(2, launcherCreationPolicy="AtStartup", **ELASTIC)
    state = desired.build(j, settings=Settings(), ssh_keys=desired.generate_ssh_keys())
    plan = planning.plan(state, Observed(), job=j)
    head, tail = elastic_sync.split_plan(plan)
    assert [a.ref.kind for a in head.actions] == ["Service", "ConfigMap", "Secret"]
    assert [a.ref.kind for a in tail.actions] == ["Pod", "Pod", "Job"]
    assert head.actions + tail.actions == plan.actions
