"""The elastic step around a job's life: out-of-bounds replicas reported once per value (also across
a restart), a suspended job that lists no host and reports its pods as they are, a resume that
starts afresh, and the launcher Job stopped (its deadline lowered) after a below-minReplicas
failure."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpi_operator.api.models import MPIJob
from mpi_operator.elastic.launcher_stop import launcher_stop

from .cluster import JOB_UID, T0, ElasticCluster, elastic_job

OOB = "ReplicasOutOfBounds"


def restarted(cluster: ElasticCluster) -> ElasticCluster:
    """A new operator: only the job, the pods and the ConfigMap survive."""
    fresh = ElasticCluster(cluster.job, now=cluster.now)
    fresh.pods = copy.deepcopy(cluster.pods)
    fresh.config_map = copy.deepcopy(cluster.config_map)
    return fresh


RESTART = -1
"""In a script of replica counts: restart the operator instead of scaling."""

OUT_OF_BOUNDS_SCRIPTS: dict[str, list[tuple[int, bool]]] = {
    "repeated-syncs": [(12, True), (12, False), (12, False), (12, False)],
    "operator-restart": [(12, True), (RESTART, False), (12, False)],
    "another-value": [(12, True), (13, True), (13, False), (12, True)],
    "back-in-bounds-then-out-again": [(12, True), (3, False), (3, False), (12, True)],
    "below-min": [(0, True), (0, False), (1, False), (0, True)],
    "in-bounds": [(3, False), (4, False)],
}


@pytest.mark.parametrize("script", OUT_OF_BOUNDS_SCRIPTS.values(), ids=OUT_OF_BOUNDS_SCRIPTS.keys())
def test_out_of_bounds_replicas_are_reported_once_per_value(script: list[tuple[int, bool]]) -> None:
    cluster = ElasticCluster(elastic_job(2, min_replicas=1, max_replicas=4))
    cluster.step()
    for replicas, reported in script:
        if replicas == RESTART:
            cluster = restarted(cluster)
        else:
            cluster.scale(replicas)
        events = [e for e in cluster.step().events if e.reason == OOB]
        assert len(events) == int(reported), (replicas, events)
        if reported:
            assert f"replicas {replicas} outside elasticPolicy bounds [1, 4]" in events[0].message
        want = replicas if replicas != RESTART and not 1 <= replicas <= 4 else None
        if replicas != RESTART:
            assert cluster.state_json().get("outOfBoundsReported") == want


def running(replicas: int, **policy: Any) -> ElasticCluster:
    """A job whose `replicas` workers are Ready and listed."""
    cluster = ElasticCluster(elastic_job(replicas, **policy))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    assert len(cluster.listed()) == replicas
    return cluster


def test_a_suspended_job_lists_no_host_and_reports_its_pods_as_they_are() -> None:
    cluster = running(3, min_replicas=2, settle=0)
    cluster.suspend()
    decision = cluster.step()
    assert cluster.listed() == []
    assert decision.discovery_changed
    assert [e.reason for e in decision.events] == ["DiscoveryHostsRemoved"]
    assert "suspended" in decision.events[0].message
    assert decision.status == {
        "desired": 3,
        "ready": 3,  # the suspend's pod deletions are the planner's: the pods are still Ready here
        "discovered": 0,
        "draining": 0,
        "replacements": 0,
        "disruptions": 0,
        "minReplicas": 2,
        "maxReplicas": 8,
    }
    assert (decision.drain, decision.delete, decision.replace, decision.fail) == ([], [], [], None)

    for index in cluster.indices():
        cluster.terminate(index)
    cluster.tick(3600)
    decision = cluster.step()
    assert decision.status["ready"] == 0
    assert decision.events == []
    assert not decision.discovery_changed
    assert (decision.drain, decision.delete, decision.replace, decision.fail) == ([], [], [], None)
    assert decision.requeue_after is None
    state = cluster.state_json()
    assert state["members"] == []
    assert "belowMinSince" not in state
    assert "reachedMin" not in state


def test_suspending_mid_scale_in_and_below_min_stops_both_clocks() -> None:
    cluster = running(4, min_replicas=3, settle=0, grace=30, below_min_timeout=10)
    cluster.scale(3)
    assert cluster.step().drain, "worker 3 starts draining"
    cluster.fail(0)
    decision = cluster.step()
    assert [e.reason for e in decision.events if e.reason == "BelowMinReplicas"]
    cluster.suspend()
    decision = cluster.step()
    assert decision.status["draining"] == 0
    assert decision.delete == []
    cluster.tick(3600)
    decision = cluster.step()
    assert decision.fail is None, "a suspended job never fails below minReplicas"
    assert decision.delete == []


def test_resume_starts_from_an_empty_host_list_without_counting_replacements() -> None:
    cluster = running(3, min_replicas=2, settle=0, below_min_timeout=10)
    cluster.fail(1)
    cluster.step()
    cluster.set_ready()
    cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1-r1", "hvd-worker-2"]
    cluster.suspend()
    cluster.step()
    for index in cluster.indices():
        cluster.gone(index)
    cluster.step()

    cluster.suspend(False)
    decision = cluster.step()
    assert [e.reason for e in decision.events] == []
    assert decision.status["replacements"] == 1, "the suspend's deletions are no failures"
    assert decision.replace == []
    assert [cluster.hostname(i) for i in cluster.indices()] == [
        "hvd-worker-0",
        "hvd-worker-1-r1",
        "hvd-worker-2",
    ]
    cluster.tick(
        3600
    )  # image pulls after the resume: the below-min clock waits for minReplicas again
    assert cluster.step().fail is None
    cluster.set_ready()
    decision = cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1-r1", "hvd-worker-2"]
    assert [e.reason for e in decision.events] == ["DiscoveryHostsAdded"]
    assert decision.status["discovered"] == 3


# --- the launcher after a below-minReplicas failure ----------------------------------------------

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
STARTED = "2026-11-25T11:59:17Z"  # 43 s before NOW


def mpijob(*conditions: tuple[str, str]) -> MPIJob:
    raw = elastic_job(2).model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["status"] = {
        "conditions": [
            {"type": kind, "status": "True", "reason": reason, "message": "m"}
            for kind, reason in conditions
        ]
    }
    return MPIJob.model_validate(raw)


def launcher(
    *,
    started: str | None = STARTED,
    deadline: int | None = None,
    finished: str | None = None,
    owner: str = JOB_UID,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "hvd-launcher",
        "uid": "job-uid",
        "ownerReferences": [{"kind": "MPIJob", "name": "hvd", "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = STARTED
    status: dict[str, Any] = {"active": 1}
    if started is not None:
        status["startTime"] = started
    if finished is not None:
        status["conditions"] = [{"type": finished, "status": "True"}]
    spec: dict[str, Any] = {"backoffLimit": 6}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


FAILED_BELOW_MIN = mpijob(("Created", "MPIJobCreated"), ("Failed", "BelowMinReplicas"))

STOP_CASES: dict[str, tuple[MPIJob, dict[str, Any] | None, int | None]] = {
    "running-launcher": (FAILED_BELOW_MIN, launcher(), 43),
    "just-started": (FAILED_BELOW_MIN, launcher(started="2026-11-25T12:00:00Z"), 1),
    "not-started-yet": (FAILED_BELOW_MIN, launcher(started=None), 1),
    "user-deadline-later": (FAILED_BELOW_MIN, launcher(deadline=86400), 43),
    "deadline-already-due": (FAILED_BELOW_MIN, launcher(deadline=43), None),
    "launcher-failed": (FAILED_BELOW_MIN, launcher(finished="Failed"), None),
    "launcher-complete": (FAILED_BELOW_MIN, launcher(finished="Complete"), None),
    "launcher-deleting": (FAILED_BELOW_MIN, launcher(deleting=True), None),
    "no-launcher": (FAILED_BELOW_MIN, None, None),
    "foreign-launcher": (FAILED_BELOW_MIN, launcher(owner="someone-else"), None),
    "failed-otherwise": (mpijob(("Failed", "MPIJobEvicted")), launcher(), None),
    "succeeded": (mpijob(("Succeeded", "MPIJobSucceeded")), launcher(), None),
    "running": (mpijob(("Running", "MPIJobRunning")), launcher(), None),
}


@pytest.mark.parametrize(("job", "observed", "want"), STOP_CASES.values(), ids=STOP_CASES.keys())
def test_launcher_stop_after_below_min_failure(
    job: MPIJob, observed: dict[str, Any] | None, want: int | None
) -> None:
    stop = launcher_stop(job, observed, now=NOW)
    if want is None:
        assert stop is None
        return
    assert stop is not None
    assert stop.name == "hvd-launcher"
    assert stop.patch == {"spec": {"activeDeadlineSeconds": want}}


@given(active_us=st.integers(0, 10**12), later_us=st.integers(0, 10**12))
def test_launcher_stop_writes_once_and_its_deadline_has_passed(
    active_us: int, later_us: int
) -> None:
    active = timedelta(microseconds=active_us)
    observed = launcher(started=T0.strftime("%Y-%m-%dT%H:%M:%SZ"))
    stop = launcher_stop(FAILED_BELOW_MIN, observed, now=T0 + active)
    assert stop is not None
    deadline = stop.patch["spec"]["activeDeadlineSeconds"]
    assert deadline >= 1
    assert deadline <= max(active.total_seconds(), 1.0), (
        "the Job controller must find the deadline passed"
    )
    observed["spec"]["activeDeadlineSeconds"] = deadline
    later = T0 + active + timedelta(microseconds=later_us)
    assert launcher_stop(FAILED_BELOW_MIN, observed, now=later) is None
