"""The Events kubesim's kubelet, scheduler and Job controller record, read back with the real
kubectl (`describe`, `get events`) on the fake clock: a pod's life, a crash loop, a Job, a missing
volume."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl

pytestmark = pytest.mark.kubectl


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0, job_backoff_seconds=1.0)


def pod(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "example/main:1"}], **spec},
    }


def create(sim: KubeSim, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    rt = sim.cluster.registry.by_kind(body["apiVersion"], kind)
    assert rt is not None
    return sim.cluster.create(rt, "default", body).object


async def events_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    rc, out, err = await kubectl(
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        f"involvedObject.name={name}",
        "-o",
        "json",
    )
    assert rc == 0, err
    items: list[dict[str, Any]] = json.loads(out)["items"]
    # Creation order; the names carry the nanosecond they were recorded at, as client-go's do.
    return sorted(items, key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))


async def test_a_pods_life_reads_like_a_clusters(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    created = create(sim, "Pod", pod("web"))
    await clock.advance(2.0)
    rc, _out, err = await kubectl("delete", "pod", "web", "--wait=false")
    assert rc == 0, err
    await clock.settle()

    events = await events_of(kubectl, "web")
    seen = [(e["reason"], e.get("reportingComponent"), e["message"]) for e in events]
    assert seen == [
        ("Scheduled", "default-scheduler", "Successfully assigned default/web to kubesim-node"),
        ("Pulled", "kubelet", 'Container image "example/main:1" already present on machine'),
        ("Created", "kubelet", "Created container: main"),
        ("Started", "kubelet", "Started container main"),
        ("Killing", "kubelet", "Stopping container main"),
    ], seen
    kubelet_events = events[1:]
    assert all(
        e["source"] == {"component": "kubelet", "host": "kubesim-node"} for e in kubelet_events
    )
    assert all(e["involvedObject"]["fieldPath"] == "spec.containers{main}" for e in kubelet_events)
    assert all(e["involvedObject"]["uid"] == created["metadata"]["uid"] for e in events)
    assert events[0]["action"] == "Binding"
    assert events[0]["eventTime"]


async def test_describe_pod_lists_the_events(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    create(sim, "Pod", pod("desc"))
    await clock.advance(2.0)
    rc, out, err = await kubectl("describe", "pod", "desc", "-n", "default")
    assert rc == 0, err
    section = out.split("\nEvents:", 1)[1]
    lines = [line.split() for line in section.strip().splitlines()[2:]]
    assert [(cols[0], cols[1]) for cols in lines] == [
        ("Normal", "Scheduled"),
        ("Normal", "Pulled"),
        ("Normal", "Created"),
        ("Normal", "Started"),
    ], section
    assert "default-scheduler" in lines[0], section
    assert "kubelet" in lines[3], section


async def test_get_events_sorted_by_last_timestamp(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    # --sort-by asks the Table's rows to carry the whole object (includeObject=Object).
    create(sim, "Pod", pod("sorted"))
    await clock.advance(2.0)
    rc, out, err = await kubectl("get", "events", "-n", "default", "--sort-by=.lastTimestamp")
    assert rc == 0, err
    reasons = [line.split()[2] for line in out.strip().splitlines()[1:]]
    assert reasons[0] == "Scheduled", out
    assert "Started" in reasons, out


async def test_a_crash_loop_backs_off_and_aggregates(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    created = create(
        sim, "Pod", pod("crash", {"kubesim/run-seconds": "1", "kubesim/exit-code": "2"})
    )
    await clock.advance(1.0)
    for _ in range(3):
        await clock.advance(1.0)
    events = {e["reason"]: e for e in await events_of(kubectl, "crash")}
    back_off = events["BackOff"]
    uid = created["metadata"]["uid"]
    assert back_off["type"] == "Warning"
    assert (
        back_off["message"]
        == f"Back-off restarting failed container main in pod crash_default({uid})"
    )
    # One event per distinct message: each restart bumps the count of the one already written.
    assert back_off["count"] == 3, back_off
    assert events["Started"]["count"] == 4, events["Started"]
    rc, out, err = await kubectl(
        "get", "events", "-n", "default", "--field-selector", "reason=BackOff"
    )
    assert rc == 0, err
    assert "Back-off restarting failed container main" in out


async def test_a_missing_configmap_is_a_failed_mount(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    volumes = [{"name": "cfg", "configMap": {"name": "absent"}}]
    create(sim, "Pod", pod("mount", volumes=volumes))
    await clock.advance(3.0)
    events = {e["reason"]: e for e in await events_of(kubectl, "mount")}
    failed = events["FailedMount"]
    assert failed["type"] == "Warning"
    assert (
        failed["message"]
        == 'MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found'
    )
    assert failed["count"] >= 2
    assert "Started" not in events


async def test_a_jobs_events(sim: KubeSim, clock: FakeClock, kubectl: Kubectl) -> None:
    template = pod("x", {"kubesim/run-seconds": "1"}, restartPolicy="Never")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once", "namespace": "default"},
        "spec": {
            "template": {
                "metadata": {"annotations": template["metadata"]["annotations"]},
                "spec": template["spec"],
            }
        },
    }
    create(sim, "Job", job)
    await clock.advance(3.0)
    events = await events_of(kubectl, "once")
    reasons = [(e["reason"], e["source"]["component"]) for e in events]
    assert reasons == [("SuccessfulCreate", "job-controller"), ("Completed", "job-controller")], (
        reasons
    )
    assert events[0]["message"].startswith("Created pod: once-")
    assert events[1]["message"] == "Job completed"


async def test_a_job_past_its_backoff_limit(
    sim: KubeSim, clock: FakeClock, kubectl: Kubectl
) -> None:
    annotations = {"kubesim/run-seconds": "1", "kubesim/exit-code": "1"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fails", "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": pod("x", restartPolicy="Never")["spec"],
            },
        },
    }
    create(sim, "Job", job)
    await clock.advance(3.0)
    events = {e["reason"]: e for e in await events_of(kubectl, "fails")}
    failed = events["BackoffLimitExceeded"]
    assert failed["type"] == "Warning"
    assert failed["message"] == "Job has reached the specified backoff limit"
