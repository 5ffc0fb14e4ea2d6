"""The elastic inputs of the pure builders and planner (no cluster): host names and annotations per
worker incarnation, the launcher's bound variables, the gang size, the ConfigMap's state annotation,
and `elastic.sync.prepare`, whose writes the planner places in their phases. Static jobs must build
exactly what they built before."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from mpi_operator import desired, planning
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import ElasticInputs, config, podgroup, workers
from mpi_operator.elastic import (
    STATE_ANNOTATION,
    ElasticDecision,
    PodAnnotationPatch,
    PodDeletion,
    discovery_revision_annotation,
    published_state,
)
from mpi_operator.elastic import sync as elastic_sync
from mpi_operator.elastic.launcher_env import DISCOVERY_REVISION_ANNOTATION
from mpi_operator.planning import Delete, ElasticWrites, Observed, Patch, Phase, owned
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
        elastic=ElasticInputs(
            worker_hostnames={},
            worker_annotations={},
            config_map_annotations={},
            launcher_env=(),
            pod_group_min_member=None,
        ),
    )
    assert after == before


def test_elastic_inputs_reach_every_child() -> None:
    j = job(2, **ELASTIC)
    extra = [{"name": "MPIJOB_MIN_NP", "value": "2"}]
    state = desired.build(
        j,
        settings=Settings(gang_scheduling="volcano"),
        elastic=ElasticInputs(
            worker_hostnames={1: "pi-worker-1-r1"},
            worker_annotations={1: {"mpi-operator.kubeflow.org/incarnation": "1"}},
            config_map_annotations={STATE_ANNOTATION: "{}"},
            launcher_env=tuple(extra),
            pod_group_min_member=3,
        ),
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
    spec: dict[str, Any] = {"launcherCreationPolicy": "AtStartup"}
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
    assert annotations.get("x") == observed["metadata"].get("annotations", {}).get("x"), (
        "others are kept"
    )
    assert update.obj["metadata"]["resourceVersion"] == "7"


def test_prepare_is_none_for_a_static_job_and_clamps_an_elastic_one() -> None:
    assert elastic_sync.prepare(job(), Observed(), now=NOW, cluster_domain="") is None
    sync = elastic_sync.prepare(job(9, **ELASTIC), Observed(), now=NOW, cluster_domain="")
    assert sync is not None
    assert sync.decision is not None
    assert config.worker_replicas(sync.job) == 4
    assert sync.decision.status["desired"] == 4
    assert [e.reason for e in sync.decision.events] == ["ReplicasOutOfBounds"]
    env = {e["name"]: e["value"] for e in sync.inputs.launcher_env}
    assert (env["MPIJOB_MIN_NP"], env["MPIJOB_MAX_NP"]) == ("2", "4")
    assert sync.inputs.pod_group_min_member == 2, "minReplicas; the launcher waits for them"
    assert set(sync.inputs.worker_hostnames or {}) == {0, 1, 2, 3}
    assert sync.writes.paces_scale_in
    assert sync.writes.launcher_ready_workers == 2


def test_prepare_lists_no_host_while_suspended() -> None:
    sync = elastic_sync.prepare(
        job(2, runPolicy={"suspend": True}, **ELASTIC), Observed(), now=NOW, cluster_domain=""
    )
    assert sync is not None
    assert sync.decision is not None
    assert sync.inputs.discovered == ()
    assert sync.decision.status["discovered"] == 0
    assert not any(a.phase is Phase.STOP for a in sync.writes.actions)


def test_prepare_runs_no_step_once_finished() -> None:
    raw = job(2, **ELASTIC).model_dump(by_alias=True, exclude_none=True, mode="json")
    finished = MPIJob.model_validate(
        {**raw, "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}
    )
    sync = elastic_sync.prepare(finished, Observed(), now=NOW, cluster_domain="")
    assert sync is not None
    assert sync.decision is None
    assert sync.inputs.discovered is None
    assert not sync.writes.paces_scale_in, (
        "a finished job's excess workers are the planner's to delete"
    )


def test_the_plan_of_a_static_job_sends_discovery_before_the_workload() -> None:
    j = job(2, launcherCreationPolicy="AtStartup")
    state = desired.build(j, settings=Settings(), ssh_keys=desired.generate_ssh_keys())
    plan = planning.plan(state, Observed(), job=j)
    assert [(a.phase, a.ref.kind) for a in plan.actions] == [
        (Phase.DISCOVERY, "Service"),
        (Phase.DISCOVERY, "ConfigMap"),
        (Phase.DISCOVERY, "Secret"),
        (Phase.WORKLOAD, "Pod"),
        (Phase.WORKLOAD, "Pod"),
        (Phase.WORKLOAD, "Job"),
    ]
    assert not plan.urgent


def launcher_pod(name: str, revision: str | None = None, **status: Any) -> dict[str, Any]:
    annotations = {DISCOVERY_REVISION_ANNOTATION: revision} if revision is not None else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"u-{name}",
            "annotations": annotations,
        },
        "status": status or {"phase": "Running"},
    }


def decision(**fields: Any) -> ElasticDecision:
    published = published_state(job(2, **ELASTIC), None, cluster_domain="")
    return ElasticDecision(
        discovered=[("pi-worker-0.pi.default.svc", 1)], publish=published, **fields
    )


def test_a_decision_becomes_drain_announce_and_release_writes() -> None:
    the_decision = decision(
        drain=[PodAnnotationPatch("pi-worker-3", "u3", {"drain": "now"})],
        delete=[PodDeletion("pi-worker-3", "u3", 3, "scaled in")],
        replace=[PodDeletion("pi-worker-1", "u1", 1, "failed")],
    )
    current = discovery_revision_annotation(the_decision.discovered)[DISCOVERY_REVISION_ANNOTATION]
    pods = [
        launcher_pod("pi-launcher-a"),
        launcher_pod("pi-launcher-b", revision=current),
        launcher_pod("pi-launcher-c", phase="Failed"),
    ]
    actions = elastic_sync.decision_actions(job(2, **ELASTIC), the_decision, pods)
    assert [(a.phase, type(a).__name__, a.ref.name) for a in actions] == [
        (Phase.ANNOUNCE, "Patch", "pi-launcher-a"),
        (Phase.DRAIN, "Patch", "pi-worker-3"),
        (Phase.RELEASE, "Delete", "pi-worker-1"),
        (Phase.RELEASE, "Delete", "pi-worker-3"),
    ], "only a live launcher pod without the current revision is touched; replacements go first"
    touch, drain = actions[0], actions[1]
    assert isinstance(drain, Patch)
    assert drain.patch == {"metadata": {"annotations": {"drain": "now"}}}
    assert isinstance(touch, Patch)
    assert touch.patch == {"metadata": {"annotations": {DISCOVERY_REVISION_ANNOTATION: current}}}
    assert [a.uid for a in actions if isinstance(a, Delete)] == ["u1", "u3"]


def test_the_planner_places_elastic_writes_in_their_phases() -> None:
    j = job(2, launcherCreationPolicy="AtStartup", **ELASTIC)
    state = desired.build(j, settings=Settings(), ssh_keys=desired.generate_ssh_keys())
    the_decision = decision(
        drain=[PodAnnotationPatch("pi-worker-3", "u3", {"drain": "now"})],
        delete=[PodDeletion("pi-worker-3", "u3", 3, "scaled in")],
    )
    writes = ElasticWrites(
        actions=tuple(
            reversed(elastic_sync.decision_actions(j, the_decision, [launcher_pod("pi-l")]))
        ),
        paces_scale_in=True,
        launcher_ready_workers=1,
        urgent=True,
    )
    plan = planning.plan(state, Observed(), job=j, elastic=writes)
    assert [(a.phase, a.ref.kind) for a in plan.actions] == [
        (Phase.DISCOVERY, "Service"),
        (Phase.DISCOVERY, "ConfigMap"),
        (Phase.DISCOVERY, "Secret"),
        (Phase.DISCOVERY, "PodDisruptionBudget"),
        (Phase.ANNOUNCE, "Pod"),
        (Phase.DRAIN, "Pod"),
        (Phase.RELEASE, "Pod"),
        (Phase.WORKLOAD, "Pod"),
        (Phase.WORKLOAD, "Pod"),
        (Phase.WORKLOAD, "Job"),
    ]
    assert plan.urgent


def test_the_planner_refuses_elastic_writes_outside_the_elastic_phases() -> None:
    j = job(2, **ELASTIC)
    state = desired.build(j, settings=Settings(), ssh_keys=desired.generate_ssh_keys())
    stray = Delete(ref=planning.ObjectRef("v1", "Pod", "default", "pi-worker-1"), uid="u1")
    with pytest.raises(ValueError, match="outside the elastic phases"):
        planning.plan(state, Observed(), job=j, elastic=ElasticWrites(actions=(stray,)))


def test_a_plan_holds_its_actions_in_phase_order() -> None:
    ref = planning.ObjectRef("v1", "Pod", "default", "pi-worker-1")
    early = Patch(ref=ref, patch={}, phase=Phase.DRAIN, why="x")
    late = Delete(ref=ref, uid="u1", phase=Phase.RELEASE)
    assert planning.Plan(actions=(early, late)).actions == (early, late)
    with pytest.raises(ValueError, match="out of phase order"):
        planning.Plan(actions=(late, early))


def test_a_failed_elastic_job_stops_its_launcher_last() -> None:
    raw = job(2, **ELASTIC).model_dump(by_alias=True, exclude_none=True, mode="json")
    reason = "BelowMinReplicas"
    conditions = [{"type": "Failed", "status": "True", "reason": reason}]
    failed = MPIJob.model_validate(
        {**raw, "status": {"conditions": conditions, "completionTime": "2026-01-01T00:00:00Z"}}
    )
    launcher = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "default",
            "uid": "u-l",
            "ownerReferences": [{"uid": "u-1", "controller": True}],
        },
        "spec": {},
        "status": {"startTime": "2025-12-31T23:59:00Z", "active": 1},
    }
    sync = elastic_sync.prepare(failed, Observed(launcher_job=launcher), now=NOW, cluster_domain="")
    assert sync is not None
    assert sync.decision is None
    (stop,) = sync.writes.actions
    assert isinstance(stop, Patch)
    assert stop.phase is Phase.STOP
    assert stop.patch == {"spec": {"activeDeadlineSeconds": 60}}
    assert [e.reason for e in stop.events] == ["LauncherStopped"]
