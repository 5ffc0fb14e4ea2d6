"""kubesim's EventRecorder builds each Event in the shape the apiserver's decode leaves it, which is
why its creates skip admission's schema walk (`Cluster.create(decoded=True)`): walking every Event
the kubelet, the scheduler and the Job controller record gives it back unchanged, with nothing
unknown or undecodable."""

from __future__ import annotations

from typing import Any

from kubesim import builtins
from kubesim.clock import FakeClock
from kubesim.cluster import Cluster
from kubesim.controllers.events import EventRecorder
from kubesim.controllers.podevents import PodEvents
from kubesim.testing import decode_changes


def stored_pod(cluster: Cluster, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "example/main:1"}], **spec},
    }
    return cluster.create(builtins.PODS, "default", body).stored


def test_every_recorded_event_is_what_the_decode_leaves() -> None:
    cluster, clock = Cluster(), FakeClock()
    pod = stored_pod(cluster, "web", initContainers=[{"name": "init", "image": "example/init:1"}])
    events = PodEvents(cluster, clock, "kubesim-node")
    events.scheduled(pod)
    events.started(pod, "init", init=True)
    events.started(pod, "main")
    events.failed(pod, "main", "CreateContainerConfigError", 'configmap "x" not found')
    events.back_off(pod, "main")
    events.killing(pod, "main")
    events.failed_mount(pod, "MountVolume.SetUp failed")
    events.evicted(pod, "The node was low on resource: memory.")
    events.container_event(
        pod, "main", "Warning", "Unhealthy", "Readiness probe failed: " + "x" * 2000
    )
    job = cluster.create(
        builtins.JOBS,
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox:1"}],
                    }
                }
            },
        },
    ).stored
    EventRecorder(cluster, clock, "job-controller").event(
        job, "Normal", "Completed", "Job completed"
    )

    recorded = cluster.list(builtins.EVENTS, "default")["items"]
    assert len(recorded) == 14
    assert [change for event in recorded if (change := decode_changes(event, "v1", "Event"))] == []
