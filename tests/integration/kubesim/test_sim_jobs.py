"""The simulated batch/v1 Job controller through the real Cluster (1.32 semantics)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sim_controller_helpers import eventually, fast_settings, rt

from kubesim.app import KubeSim
from kubesim.cluster import DeleteOptions
from kubesim.settings import SimSettings


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_settings()


@pytest.fixture
def sim(kubesim: KubeSim) -> KubeSim:
    """The `kubesim` fixture's cluster, running with the settings above."""
    return kubesim


def create_job(
    sim: KubeSim, name: str, annotations: dict[str, str], *, policy: str = "Never", **spec: Any
) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"restartPolicy": policy, "containers": [{"name": "main", "image": "busybox"}]},
            },
            **spec,
        },
    }
    return sim.cluster.create(rt(sim, "batch/v1", "Job"), "default", body).object


def job(sim: KubeSim, name: str) -> dict[str, Any]:
    return sim.cluster.get(rt(sim, "batch/v1", "Job"), "default", name)


def pods(sim: KubeSim) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = sim.cluster.list(rt(sim, "v1", "Pod"), "default")["items"]
    return items


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"].get("conditions", []) if c["status"] == "True"}


def finished(sim: KubeSim, name: str) -> dict[str, Any] | None:
    j = job(sim, name)
    return j if {"Complete", "Failed"} & set(conditions(j)) else None


async def test_failing_pods_retry_up_to_backoff_limit_then_job_fails(sim: KubeSim) -> None:
    create_job(sim, "j", {"kubesim/run-seconds": "2", "kubesim/exit-code": "1"}, backoffLimit=2)
    failed = await eventually(lambda: finished(sim, "j"), within=4.0)
    conds = conditions(failed)
    assert conds["Failed"]["reason"] == "BackoffLimitExceeded"
    assert conds["FailureTarget"]["reason"] == "BackoffLimitExceeded"
    assert failed["status"]["failed"] == 3
    assert "active" not in failed["status"]
    assert "completionTime" not in failed["status"]
    await asyncio.sleep(0.3)
    assert len(pods(sim)) == 3
    assert all(p["status"]["phase"] == "Failed" for p in pods(sim))
    assert all(not p["metadata"].get("finalizers") for p in pods(sim))


async def test_pods_are_built_from_the_template(sim: KubeSim) -> None:
    created = create_job(sim, "j", {"kubesim/run-seconds": "100"})
    (pod,) = await eventually(lambda: pods(sim), within=4.0)
    uid = created["metadata"]["uid"]
    meta = pod["metadata"]
    assert meta["name"].startswith("j-")
    assert len(meta["name"]) == len("j-") + 5
    assert meta["labels"] == {
        "app": "j",
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "j",
        "controller-uid": uid,
        "job-name": "j",
    }
    assert meta["annotations"] == {"kubesim/run-seconds": "100"}
    (ref,) = meta["ownerReferences"]
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    running = await eventually(lambda: (j := job(sim, "j"))["status"].get("ready") == 1 and j, within=4.0)
    assert running["status"]["active"] == 1
    assert running["status"]["startTime"]


async def test_completions_with_parallelism_complete_the_job(sim: KubeSim) -> None:
    create_job(sim, "j", {"kubesim/run-seconds": "3"}, completions=3, parallelism=2)
    await eventually(lambda: job(sim, "j")["status"].get("active") == 2, within=4.0)
    done = await eventually(lambda: finished(sim, "j"), within=4.0)
    conds = conditions(done)
    assert set(conds) == {"SuccessCriteriaMet", "Complete"}
    assert conds["Complete"]["reason"] == "CompletionsReached"
    assert done["status"]["succeeded"] == 3
    assert done["status"]["completionTime"]
    assert len(pods(sim)) == 3


async def test_active_deadline_fails_the_job_and_deletes_pods(sim: KubeSim) -> None:
    create_job(sim, "j", {}, activeDeadlineSeconds=5)
    failed = await eventually(lambda: finished(sim, "j"), within=4.0)
    assert conditions(failed)["Failed"]["reason"] == "DeadlineExceeded"
    assert conditions(failed)["Failed"]["message"] == "Job was active longer than specified deadline"
    await eventually(lambda: not pods(sim), within=4.0)


async def test_suspend_and_resume(sim: KubeSim) -> None:
    jobs = rt(sim, "batch/v1", "Job")
    create_job(sim, "j", {}, suspend=True)
    suspended = await eventually(
        lambda: (j := job(sim, "j")) and "Suspended" in conditions(j) and j, within=4.0
    )
    assert conditions(suspended)["Suspended"]["reason"] == "JobSuspended"
    assert "startTime" not in suspended["status"]
    assert not pods(sim)
    current = job(sim, "j")
    sim.cluster.update(jobs, "default", "j", {**current, "spec": {**current["spec"], "suspend": False}})
    running = await eventually(lambda: (j := job(sim, "j"))["status"].get("active") == 1 and j, within=4.0)
    resumed = next(c for c in running["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed")
    assert running["status"]["startTime"]
    current = job(sim, "j")
    sim.cluster.update(jobs, "default", "j", {**current, "spec": {**current["spec"], "suspend": True}})
    await eventually(lambda: not pods(sim), within=4.0)
    again = job(sim, "j")
    assert "active" not in again["status"]
    assert again["status"].get("failed", 0) == 0


async def test_ttl_after_finished_deletes_job_and_pods(sim: KubeSim) -> None:
    create_job(sim, "j", {"kubesim/run-seconds": "1"}, ttlSecondsAfterFinished=10)
    await eventually(lambda: finished(sim, "j"), within=4.0)
    await eventually(lambda: not sim.cluster.list(rt(sim, "batch/v1", "Job"), "default")["items"], within=4.0)
    await eventually(lambda: not pods(sim), within=4.0)


@pytest.mark.parametrize(
    ("policy", "during_termination"),
    [("TerminatingOrFailed", 2), ("Failed", 1)],
    ids=["terminating-or-failed", "failed-only"],
)
async def test_pod_replacement_policy(sim: KubeSim, policy: str, during_termination: int) -> None:
    # The old pod takes 60 simulated seconds to stop; the failure back-off before a replacement is 10.
    create_job(sim, "j", {"kubesim/termination-seconds": "60"}, podReplacementPolicy=policy)
    (pod,) = await eventually(lambda: [p for p in pods(sim) if p["status"]["phase"] == "Running"], within=4.0)
    sim.cluster.delete(
        rt(sim, "v1", "Pod"),
        "default",
        pod["metadata"]["name"],
        options=DeleteOptions(grace_period_seconds=60),
    )
    await asyncio.sleep(0.25)
    assert len(pods(sim)) == during_termination
    assert job(sim, "j")["status"]["terminating"] == 1
    await eventually(
        lambda: len(pods(sim)) == 1 and pods(sim)[0]["metadata"]["name"] != pod["metadata"]["name"],
        within=4.0,
    )
    expected_failed = 1 if policy == "TerminatingOrFailed" else 0
    assert job(sim, "j")["status"].get("failed", 0) == expected_failed


async def test_onfailure_restarts_count_against_backoff_limit(sim: KubeSim) -> None:
    create_job(
        sim, "j", {"kubesim/run-seconds": "2", "kubesim/exit-code": "1"}, policy="OnFailure", backoffLimit=2
    )
    failed = await eventually(lambda: finished(sim, "j"), within=4.0)
    assert conditions(failed)["Failed"]["reason"] == "BackoffLimitExceeded"
    await eventually(lambda: not pods(sim), within=4.0)


async def test_deleting_job_in_background_removes_pods(sim: KubeSim) -> None:
    create_job(sim, "j", {}, parallelism=3, completions=3)
    await eventually(lambda: len(pods(sim)) == 3, within=4.0)
    sim.cluster.delete(
        rt(sim, "batch/v1", "Job"), "default", "j", options=DeleteOptions(propagation_policy="Background")
    )
    await eventually(lambda: not pods(sim), within=4.0)


async def test_orphaned_pods_lose_the_tracking_finalizer(sim: KubeSim) -> None:
    create_job(sim, "j", {})
    await eventually(lambda: [p for p in pods(sim) if p["status"]["phase"] == "Running"], within=4.0)
    sim.cluster.delete(
        rt(sim, "batch/v1", "Job"), "default", "j", options=DeleteOptions(propagation_policy="Orphan")
    )
    (pod,) = await eventually(
        lambda: [p for p in pods(sim) if not p["metadata"].get("finalizers")], within=4.0
    )
    assert not pod["metadata"].get("ownerReferences")
    assert pod["status"]["phase"] == "Running"
