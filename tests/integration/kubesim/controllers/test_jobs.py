"""The simulated batch/v1 Job controller through the real Cluster (1.32 semantics).

On the fake clock (conftest.py): pods start 1 simulated second after they are created and are ready
1 s later; the pod-failure back-off is 10 s, doubling. Annotation values are simulated seconds.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.cluster import DeleteOptions
from kubesim.settings import SimSettings

from .controller_helpers import rt

JUST = 2**-10
"""A simulated instant: `advance(due - JUST)` checks the state right before something is due (a
power of two, so that adding it back lands exactly on `due`)."""


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0, job_backoff_seconds=10.0)


async def create_job(
    sim: KubeSim, name: str, annotations: dict[str, str], *, policy: str = "Never", **spec: Any
) -> dict[str, Any]:
    """Creates the Job and lets the controllers act on it, at the current simulated time."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {
                    "restartPolicy": policy,
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            },
            **spec,
        },
    }
    created = sim.cluster.create(rt(sim, "batch/v1", "Job"), "default", body).object
    assert isinstance(sim.controllers.clock, FakeClock)
    await sim.controllers.clock.settle()
    return created


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


async def test_failing_pods_retry_up_to_backoff_limit_then_job_fails(
    sim: KubeSim, clock: FakeClock
) -> None:
    await create_job(
        sim, "j", {"kubesim/run-seconds": "2", "kubesim/exit-code": "1"}, backoffLimit=2
    )
    # Each pod fails 1 + 2 s after its creation; replacements wait 10, then 20 s: the third fails at
    # 39.
    await clock.advance(39 - JUST)
    assert finished(sim, "j") is None
    await clock.advance(JUST)
    failed = finished(sim, "j")
    assert failed is not None
    conds = conditions(failed)
    assert conds["Failed"]["reason"] == "BackoffLimitExceeded"
    assert conds["FailureTarget"]["reason"] == "BackoffLimitExceeded"
    assert failed["status"]["failed"] == 3
    assert "active" not in failed["status"]
    assert "completionTime" not in failed["status"]
    await clock.advance(3600)
    assert len(pods(sim)) == 3
    assert all(p["status"]["phase"] == "Failed" for p in pods(sim))
    assert all(not p["metadata"].get("finalizers") for p in pods(sim))


async def test_replacement_pods_wait_for_the_doubling_backoff(
    sim: KubeSim, clock: FakeClock
) -> None:
    await create_job(
        sim, "j", {"kubesim/run-seconds": "2", "kubesim/exit-code": "1"}, backoffLimit=5
    )
    created_at = [0.0]
    # The first pod fails at 3; its replacement waits the back-off after that failure: 10 s, then 20
    # s.
    for failed_at, backoff in ((3.0, 10.0), (3.0 + 10 + 3, 20.0)):
        await clock.advance(failed_at + backoff - JUST - clock.now())
        assert len(pods(sim)) == len(created_at)
        await clock.advance(JUST)
        assert len(pods(sim)) == len(created_at) + 1
        created_at.append(clock.now())
    assert created_at == pytest.approx([0.0, 13.0, 36.0])
    assert job(sim, "j")["status"]["failed"] == 2


async def test_pods_are_built_from_the_template(sim: KubeSim, clock: FakeClock) -> None:
    created = await create_job(sim, "j", {"kubesim/run-seconds": "100"})
    (pod,) = pods(sim)
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
    assert job(sim, "j")["status"].get("ready") == 0
    await clock.advance(2)
    running = job(sim, "j")
    assert running["status"]["ready"] == 1
    assert running["status"]["active"] == 1
    assert running["status"]["startTime"]


async def test_completions_with_parallelism_complete_the_job(
    sim: KubeSim, clock: FakeClock
) -> None:
    await create_job(sim, "j", {"kubesim/run-seconds": "3"}, completions=3, parallelism=2)
    assert job(sim, "j")["status"].get("active") == 2
    # Two pods succeed at 4; the third, created then, succeeds at 8.
    await clock.advance(4)
    assert (job(sim, "j")["status"].get("succeeded"), job(sim, "j")["status"].get("active")) == (
        2,
        1,
    )
    await clock.advance(4 - JUST)
    assert finished(sim, "j") is None
    await clock.advance(JUST)
    done = finished(sim, "j")
    assert done is not None
    conds = conditions(done)
    assert set(conds) == {"SuccessCriteriaMet", "Complete"}
    assert conds["Complete"]["reason"] == "CompletionsReached"
    assert done["status"]["succeeded"] == 3
    assert done["status"]["completionTime"]
    assert len(pods(sim)) == 3


async def test_active_deadline_fails_the_job_and_deletes_pods(
    sim: KubeSim, clock: FakeClock
) -> None:
    await create_job(sim, "j", {}, activeDeadlineSeconds=5)
    await clock.advance(5 - JUST)
    assert "FailureTarget" not in conditions(job(sim, "j"))
    await clock.advance(JUST)
    assert conditions(job(sim, "j"))["FailureTarget"]["reason"] == "DeadlineExceeded"
    # Failed follows once the deleted pod has stopped (0.2 simulated seconds by default).
    await clock.advance(0.2)
    failed = finished(sim, "j")
    assert failed is not None
    assert conditions(failed)["Failed"]["reason"] == "DeadlineExceeded"
    assert (
        conditions(failed)["Failed"]["message"] == "Job was active longer than specified deadline"
    )
    assert not pods(sim)


async def test_suspend_and_resume(sim: KubeSim, clock: FakeClock) -> None:
    jobs = rt(sim, "batch/v1", "Job")
    await create_job(sim, "j", {}, suspend=True)
    suspended = job(sim, "j")
    assert conditions(suspended)["Suspended"]["reason"] == "JobSuspended"
    assert "startTime" not in suspended["status"]
    assert not pods(sim)
    current = job(sim, "j")
    sim.cluster.update(
        jobs, "default", "j", {**current, "spec": {**current["spec"], "suspend": False}}
    )
    await clock.settle()
    running = job(sim, "j")
    assert running["status"].get("active") == 1
    resumed = next(c for c in running["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed")
    assert running["status"]["startTime"]
    current = job(sim, "j")
    sim.cluster.update(
        jobs, "default", "j", {**current, "spec": {**current["spec"], "suspend": True}}
    )
    await clock.advance(0.2)
    assert not pods(sim)
    again = job(sim, "j")
    assert "active" not in again["status"]
    assert again["status"].get("failed", 0) == 0


async def test_ttl_after_finished_deletes_job_and_pods(sim: KubeSim, clock: FakeClock) -> None:
    await create_job(sim, "j", {"kubesim/run-seconds": "1"}, ttlSecondsAfterFinished=10)
    await clock.advance(2)
    assert finished(sim, "j") is not None
    await clock.advance(10 - JUST)
    assert sim.cluster.list(rt(sim, "batch/v1", "Job"), "default")["items"]
    await clock.advance(JUST)
    assert not sim.cluster.list(rt(sim, "batch/v1", "Job"), "default")["items"]
    assert not pods(sim)


@pytest.mark.parametrize(
    ("policy", "during_termination"),
    [("TerminatingOrFailed", 2), ("Failed", 1)],
    ids=["terminating-or-failed", "failed-only"],
)
async def test_pod_replacement_policy(
    sim: KubeSim, clock: FakeClock, policy: str, during_termination: int
) -> None:
    # The old pod takes 60 simulated seconds to stop; the failure back-off before a replacement is
    # 10.
    await create_job(sim, "j", {"kubesim/termination-seconds": "60"}, podReplacementPolicy=policy)
    await clock.advance(1)
    (pod,) = [p for p in pods(sim) if p["status"]["phase"] == "Running"]
    sim.cluster.delete(
        rt(sim, "v1", "Pod"),
        "default",
        pod["metadata"]["name"],
        options=DeleteOptions(grace_period_seconds=60),
    )
    await clock.advance(25)
    assert len(pods(sim)) == during_termination
    assert job(sim, "j")["status"]["terminating"] == 1
    await clock.advance(60)
    (replacement,) = pods(sim)
    assert replacement["metadata"]["name"] != pod["metadata"]["name"]
    expected_failed = 1 if policy == "TerminatingOrFailed" else 0
    assert job(sim, "j")["status"].get("failed", 0) == expected_failed


async def test_onfailure_restarts_count_against_backoff_limit(
    sim: KubeSim, clock: FakeClock
) -> None:
    await create_job(
        sim,
        "j",
        {"kubesim/run-seconds": "2", "kubesim/exit-code": "1"},
        policy="OnFailure",
        backoffLimit=2,
    )
    # The container fails at 3 and 5 and is restarted in place: two restarts reach the backoffLimit.
    await clock.advance(5 - JUST)
    assert finished(sim, "j") is None
    await clock.advance(JUST)
    assert conditions(job(sim, "j"))["FailureTarget"]["reason"] == "BackoffLimitExceeded"
    # Failed follows once the deleted pod has stopped (0.2 simulated seconds by default).
    await clock.advance(0.2)
    failed = finished(sim, "j")
    assert failed is not None
    assert conditions(failed)["Failed"]["reason"] == "BackoffLimitExceeded"
    assert not pods(sim)


async def test_deleting_job_in_background_removes_pods(sim: KubeSim, clock: FakeClock) -> None:
    await create_job(sim, "j", {}, parallelism=3, completions=3)
    assert len(pods(sim)) == 3
    sim.cluster.delete(
        rt(sim, "batch/v1", "Job"),
        "default",
        "j",
        options=DeleteOptions(propagation_policy="Background"),
    )
    await clock.advance(0.2)
    assert not pods(sim)


async def test_orphaned_pods_lose_the_tracking_finalizer(sim: KubeSim, clock: FakeClock) -> None:
    await create_job(sim, "j", {})
    await clock.advance(1)
    assert [p["status"]["phase"] for p in pods(sim)] == ["Running"]
    sim.cluster.delete(
        rt(sim, "batch/v1", "Job"),
        "default",
        "j",
        options=DeleteOptions(propagation_policy="Orphan"),
    )
    await clock.settle()
    (pod,) = pods(sim)
    assert not pod["metadata"].get("finalizers")
    assert not pod["metadata"].get("ownerReferences")
    assert pod["status"]["phase"] == "Running"
