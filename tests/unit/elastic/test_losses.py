"""Disruption is not failure: each way the cluster takes a worker is read from the pod, replaced
under a fresh host name even with no replacement budget left, counted in `disruptions` and named in
a `WorkerDisrupted` event and the job's below-minimum message; a program failure still uses up
`maxReplacements`."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.elastic import losses, replacement

from .cluster import ElasticCluster, elastic_job

KINDS = {
    "PreemptionByScheduler": "preempted by the scheduler",
    "DeletionByTaintManager": "deleted by the taint manager",
    "EvictionByEvictionAPI": "evicted through the Eviction API",
    "TerminationByKubelet": "evicted by the kubelet",
    "DeletionByPodGC": "deleted by the pod garbage collector",
}


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": status}


def target(reason: str, status: str = "True") -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": status, "reason": reason}


def ended(reason: str, code: int) -> dict[str, Any]:
    terminated = {"terminated": {"reason": reason, "exitCode": code}}
    return {"phase": "Failed", "containerStatuses": [{"name": "main", "state": terminated}]}


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ({"conditions": [target("PreemptionByScheduler")]}, "PreemptionByScheduler"),
        ({"conditions": [target("DeletionByTaintManager")]}, "DeletionByTaintManager"),
        ({"phase": "Failed", "reason": "Evicted"}, "TerminationByKubelet"),
        ({"conditions": [target("PreemptionByScheduler", "False")]}, None),
        ({"phase": "Failed", "reason": "DeadlineExceeded"}, None),
        ({"phase": "Running"}, None),
        (ended("Unknown", 255), "Unknown"),
        (ended("ContainerStatusUnknown", 137), "ContainerStatusUnknown"),
        (ended("Error", 1), None),
    ],
    ids=[
        "preempted",
        "taint-manager",
        "evicted-old-kubelet",
        "condition-false",
        "deadline",
        "alive",
        "node-rebooted",
        "container-lost",
        "program-failed",
    ],
)
def test_disruption_reason_is_read_from_the_pod(status: dict[str, Any], reason: str | None) -> None:
    assert losses.disruption_reason(pod(status)) == reason


def running(**policy: Any) -> ElasticCluster:
    cluster = ElasticCluster(elastic_job(3, min_replicas=2, settle=0, **policy))
    cluster.step()
    cluster.set_ready()
    cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1", "hvd-worker-2"]
    return cluster


@pytest.mark.parametrize("reason", sorted(KINDS))
def test_a_disrupted_worker_is_replaced_without_using_the_budget(reason: str) -> None:
    cluster = running(max_replacements=0)
    cluster.disrupt(1, reason)
    decision = cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-2"]
    assert decision.incarnations == {1: 1}, "replaced under the next host name"
    disrupted = [e for e in decision.events if e.reason == "WorkerDisrupted"]
    assert len(disrupted) == 1, [e.reason for e in decision.events]
    assert KINDS[reason] in disrupted[0].message
    assert f"({reason})" in disrupted[0].message
    assert "hvd-worker-1-r1.hvd.ns.svc" in disrupted[0].message
    assert not [e for e in decision.events if e.reason == "ReplacementBudgetExhausted"]
    assert (decision.status["replacements"], decision.status["disruptions"]) == (0, 1)
    assert cluster.state_json()["failures"][0]["disruption"] is True

    if cluster.pod(1)["metadata"].get("deletionTimestamp"):
        cluster.gone(1)
        cluster.step()
    cluster.set_ready(1)
    cluster.step()
    assert cluster.listed() == ["hvd-worker-0", "hvd-worker-1-r1", "hvd-worker-2"]


def test_a_pod_deleted_without_a_disruption_condition_is_no_program_failure() -> None:
    cluster = running(max_replacements=0)
    cluster.terminate(2)
    decision = cluster.step()
    assert decision.incarnations == {2: 1}
    (event,) = [e for e in decision.events if e.reason == "WorkerDisrupted"]
    assert "deleted by a user or a controller (Deleted)" in event.message
    assert (decision.status["replacements"], decision.status["disruptions"]) == (0, 1)


def test_a_program_failure_still_uses_the_budget_and_is_told_apart() -> None:
    cluster = running(max_replacements=1, below_min_timeout=60)
    cluster.disrupt(0, "PreemptionByScheduler")
    cluster.fail(1, exit_code=1)
    decision = cluster.step()
    assert sorted(e.reason for e in decision.events if e.reason.startswith("Worker")) == [
        "WorkerDisrupted",
        "WorkerFailed",
    ]
    assert (decision.status["replacements"], decision.status["disruptions"]) == (1, 1)
    assert [
        (x["pod"], x["kind"], x["reason"], x.get("exitCode")) for x in decision.status["losses"]
    ] == [
        ("hvd-worker-0", "Disruption", "PreemptionByScheduler", None),
        ("hvd-worker-1", "Failure", "Error", 1),
    ]
    cluster.gone(0)
    cluster.set_ready(1)
    cluster.step()
    cluster.fail(1, exit_code=2)
    exhausted = cluster.step()
    assert [e.reason for e in exhausted.events if e.reason == "ReplacementBudgetExhausted"] == [
        "ReplacementBudgetExhausted"
    ]
    cluster.tick(60)
    failed = cluster.step().fail
    assert failed is not None
    assert "hvd-worker-0 (host hvd-worker-0): preempted by the scheduler" in failed.message
    assert "hvd-worker-1 (host hvd-worker-1-r1): Error, exit code 2" in failed.message


def test_a_replaced_pod_stuck_terminating_is_force_deleted_past_its_deadline() -> None:
    """A dead node's kubelet never finishes the taint manager's delete; the pod holds the name its
    successor needs, and its host name is retired, so it goes by force `STUCK_SECONDS` later."""
    cluster = running()
    cluster.disrupt(1, "DeletionByTaintManager")  # deletionTimestamp: now, a 0 s grace period
    first = cluster.step()
    assert first.incarnations == {1: 1}
    assert first.replace == []
    assert first.requeue_after == replacement.STUCK_SECONDS
    cluster.tick(replacement.STUCK_SECONDS - 1)
    assert cluster.step().replace == []
    cluster.tick(1)
    forced = cluster.step()
    assert [(d.name, d.reason, d.force) for d in forced.replace] == [
        ("hvd-worker-1", "StuckTerminating", True)
    ]
    assert cluster.hostname(1) == "hvd-worker-1-r1", "the successor is created under its new name"
    assert forced.status["disruptions"] == 1, "the force delete is no second loss"
