"""The one write path: the `Applier` sends a plan's actions to kubesim in phase order, and what each
answer means (a Patch of a gone object is skipped, a conflict stops the plan and says in which
phase, a deleted uid is not deleted twice), checked from the cluster's side and from kubesim's
request record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import operator_testing
from kubesim.app import KubeSim
from mpi_operator import reasons
from mpi_operator.api.models import MPIJob
from mpi_operator.flowcontrol import FakeClock
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import Kube
from mpi_operator.planning import Create, Delete, ObjectRef, Patch, Phase, Plan
from mpi_operator.reasons import Event
from mpi_operator.reconcile.applier import Applier, DeletedRecently

NS = "default"
JOB = MPIJob.model_validate(
    {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": NS, "uid": "job-uid"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "template": {"spec": {"containers": [{"name": "l", "image": "busybox"}]}}
                },
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}},
                },
            }
        },
    }
)
STOPPED = Event(reasons.NORMAL, "LauncherStopped", "stopped")


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def ref(kind: str, name: str, api_version: str = "v1") -> ObjectRef:
    return ObjectRef(api_version, kind, NS, name)


def applier(
    kube: Kube,
    deleted: DeletedRecently | None = None,
    is_current: Callable[[], bool] = lambda: True,
) -> Applier:
    reported: list[tuple[str, str, str]] = []
    return Applier(
        kube,
        JOB,
        {"app": "pi"},
        lambda *event: reported.append(event),
        deleted if deleted is not None else DeletedRecently(FakeClock().now),
        is_current,
    )


def writes(kubesim: KubeSim) -> list[str]:
    return [
        f"{r.verb} {r.resource}/{r.name}"
        for r in kubesim.control.recorded(user_agent=operator_testing.TEST_AGENT)
        if r.verb in ("create", "update", "patch", "delete")
    ]


async def test_a_patch_of_a_gone_object_is_skipped_and_the_plan_goes_on(
    kube: Kube, kubesim: KubeSim
) -> None:
    await kube.create(resources.POD, pod("pi-worker-0"))
    plan = Plan(
        actions=(
            Patch(
                ref("Pod", "pi-worker-9"),
                {"metadata": {"annotations": {"a": "1"}}},
                Phase.ANNOUNCE,
                "gone",
            ),
            Patch(
                ref("Pod", "pi-worker-0"),
                {"metadata": {"annotations": {"a": "1"}}},
                Phase.DRAIN,
                "here",
            ),
            Patch(
                ref("Job", "pi-launcher", "batch/v1"),
                {"spec": {"activeDeadlineSeconds": 5}},
                Phase.STOP,
                "stop",
                events=(STOPPED,),
            ),
        )
    )
    applied = await applier(kube).apply(plan)
    assert writes(kubesim)[-3:] == [
        "patch pods/pi-worker-9",
        "patch pods/pi-worker-0",
        "patch jobs/pi-launcher",
    ]
    assert list(applied.written) == [ref("Pod", "pi-worker-0")]
    assert applied.events == [], "a Patch that found nothing records nothing"
    assert applied.stopped_in is None
    got = await kube.get(resources.POD, "pi-worker-0", NS)
    assert got["metadata"]["annotations"] == {"a": "1"}


async def test_a_written_patch_hands_back_its_events(kube: Kube) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "namespace": NS},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "l", "image": "x"}]}
            }
        },
    }
    await kube.create(resources.JOB, job)
    stop = Patch(
        ref("Job", "pi-launcher", "batch/v1"),
        {"spec": {"activeDeadlineSeconds": 5}},
        Phase.STOP,
        "stop",
        events=(STOPPED,),
    )
    applied = await applier(kube).apply(Plan(actions=(stop,)))
    assert applied.events == [STOPPED]
    assert (await kube.get(resources.JOB, "pi-launcher", NS))["spec"]["activeDeadlineSeconds"] == 5


async def test_a_conflict_stops_the_plan_in_its_phase(kube: Kube, kubesim: KubeSim) -> None:
    foreign = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pi-config", "namespace": NS},
    }
    await kube.create(resources.CONFIG_MAP, foreign)
    victim = await kube.create(resources.POD, pod("pi-worker-1"))
    plan = Plan(
        actions=(
            Create.of({**foreign, "data": {"hostfile": ""}}, Phase.DISCOVERY),
            Patch(
                ref("Pod", "pi-worker-1"),
                {"metadata": {"annotations": {"d": "1"}}},
                Phase.DRAIN,
                "drain",
            ),
            Delete(
                ref("Pod", "pi-worker-1"),
                victim["metadata"]["uid"],
                phase=Phase.RELEASE,
                why="scaled in",
            ),
        )
    )
    applied = await applier(kube).apply(plan)
    assert [c.ref for c in applied.conflicts] == [ref("ConfigMap", "pi-config")]
    assert applied.stopped_in is Phase.DISCOVERY
    assert not applied.completed(Phase.DISCOVERY)
    assert not applied.completed(Phase.DRAIN)
    assert not applied.completed(Phase.RELEASE)
    sent = writes(kubesim)
    assert "patch pods/pi-worker-1" not in sent, "nothing after the conflict is sent"
    assert "delete pods/pi-worker-1" not in sent, "nothing after the conflict is sent"
    await kube.get(resources.POD, "pi-worker-1", NS)


async def test_a_deleted_uid_is_not_deleted_twice(kube: Kube, kubesim: KubeSim) -> None:
    created = await kube.create(resources.POD, pod("pi-worker-2"))
    uid = created["metadata"]["uid"]
    delete = Delete(ref("Pod", "pi-worker-2"), uid, phase=Phase.RELEASE, why="replaced")
    clock = FakeClock()
    deleted = DeletedRecently(clock.now, ttl=300.0)
    await applier(kube, deleted).apply(Plan(actions=(delete,)))
    await applier(kube, deleted).apply(Plan(actions=(delete,)))
    assert writes(kubesim).count("delete pods/pi-worker-2") == 1
    clock.advance(301.0)
    await applier(kube, deleted).apply(Plan(actions=(delete,)))
    assert writes(kubesim).count("delete pods/pi-worker-2") == 2, "remembered for the ttl only"


def creates(count: int) -> Plan:
    return Plan(
        actions=tuple(Create.of(pod(f"pi-worker-{i}"), Phase.WORKLOAD) for i in range(count))
    )


def pod_posts(kubesim: KubeSim) -> list[int | None]:
    return [r.status for r in kubesim.control.recorded(verb="create", resource="pods")]


class Batches:
    """`is_current` that counts the batches (it is asked before each) and can act before the
    n-th."""

    def __init__(
        self, before: dict[int, Callable[[], object]] | None = None, gone_after: int = 10**6
    ) -> None:
        self.count = 0
        self.before = before or {}
        self.gone_after = gone_after

    def __call__(self) -> bool:
        self.count += 1
        if (hook := self.before.get(self.count)) is not None:
            hook()
        return self.count <= self.gone_after


async def test_pod_creates_go_out_in_slow_start_batches(kube: Kube, kubesim: KubeSim) -> None:
    batches = Batches()
    applied = await applier(kube, is_current=batches).apply(creates(10))
    assert batches.count == 4, "1 + 2 + 4 + 3"
    assert len(applied.written) == 10
    assert pod_posts(kubesim) == [201] * 10


async def test_a_failed_batch_stops_the_creates(kube: Kube, kubesim: KubeSim) -> None:
    def refuse_from_now_on() -> None:
        kubesim.control.inject_error(403, method="POST", path="/pods$", count=None)

    batches = Batches(before={2: refuse_from_now_on})
    with pytest.raises(errors.Forbidden):
        await applier(kube, is_current=batches).apply(creates(10))
    assert pod_posts(kubesim) == [201, 403, 403], "the first batch, then the second fails: no third"


async def test_the_plan_is_abandoned_once_the_job_is_gone(kube: Kube, kubesim: KubeSim) -> None:
    batches = Batches(gone_after=2)
    applied = await applier(kube, is_current=batches).apply(creates(10))
    assert applied.abandoned
    assert len(pod_posts(kubesim)) == 3, "the two batches sent while the job was there"


async def test_drain_marks_and_deletes_go_out_in_slow_start_batches_one_verb_at_a_time(
    kube: Kube, kubesim: KubeSim
) -> None:
    """A scale-in of 1,000 workers drains and deletes 1,000 pods: one at a time, the drain marks
    took 8 s and the deletes 28 s (bench/bigjob.py). Each verb starts its own slow start."""
    uids = [
        (await kube.create(resources.POD, pod(f"pi-worker-{i}")))["metadata"]["uid"]
        for i in range(10)
    ]
    drains = tuple(
        Patch(
            ref("Pod", f"pi-worker-{i}"),
            {"metadata": {"annotations": {"drain": "now"}}},
            Phase.DRAIN,
            "drain",
        )
        for i in range(10)
    )
    script = Patch(ref("ConfigMap", "pi-config"), {"data": {"a": "b"}}, Phase.DISCOVERY, "script")
    deletes = tuple(
        Delete(ref("Pod", f"pi-worker-{i}"), uid, phase=Phase.RELEASE, why="scaled in")
        for i, uid in enumerate(uids)
    )
    batches = Batches()
    await applier(kube, is_current=batches).apply(Plan(actions=(script, *drains, *deletes)))
    assert batches.count == 1 + 4 + 4, "the script, 1 + 2 + 4 + 3 marks, 1 + 2 + 4 + 3 deletes"
    sent = writes(kubesim)[-21:]
    # Within a batch the requests race; the verbs and the phases keep their order.
    assert sent[0] == "patch configmaps/pi-config"
    assert sorted(sent[1:11]) == sorted(f"patch pods/pi-worker-{i}" for i in range(10))
    assert sorted(sent[11:]) == sorted(f"delete pods/pi-worker-{i}" for i in range(10))
