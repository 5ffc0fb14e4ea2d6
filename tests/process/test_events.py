"""The process runtime's kubelet records the Events a cluster's does, read with the real kubectl: a
pod's life (Scheduled, Pulled, Created, Started, Killing on delete) and a crashing container's
BackOff."""

from __future__ import annotations

import json
from typing import Any

from kubesim.app import KubeSim
from kubesim.testing import Kubectl, wait_for

from .procrt_helpers import container_status, create, is_gone, phase, pod, shell


async def events_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name}"
    rc, out, err = await kubectl("get", "events", "--field-selector", selector, "-o", "json")
    assert rc == 0, err
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return sorted(items, key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))


async def test_a_pods_life_in_events(kubesim: KubeSim, kubectl: Kubectl) -> None:
    create(
        kubesim,
        pod("lives", shell("main", "while :; do sleep 0.1; done"), terminationGracePeriodSeconds=1),
    )
    await wait_for(kubesim, lambda: phase(kubesim, "lives") == "Running")
    rc, _, err = await kubectl("delete", "pod", "lives", "--wait=false")
    assert rc == 0, err
    await wait_for(kubesim, lambda: is_gone(kubesim, "lives"))
    events = await events_of(kubectl, "lives")
    assert [(e["reason"], e["reportingComponent"]) for e in events] == [
        ("Scheduled", "default-scheduler"),
        ("Pulled", "kubelet"),
        ("Created", "kubelet"),
        ("Started", "kubelet"),
        ("Killing", "kubelet"),
    ], events
    assert events[4]["message"] == "Stopping container main"


async def test_a_crashing_container_backs_off(kubesim: KubeSim, kubectl: Kubectl) -> None:
    created = create(kubesim, pod("crashy", shell("main", "exit 1"), restartPolicy="OnFailure"))
    uid = created["metadata"]["uid"]

    def backing_off() -> bool:
        waiting = container_status(kubesim, "crashy").get("state", {}).get("waiting") or {}
        return waiting.get("reason") == "CrashLoopBackOff"

    # The kubelet records BackOff as it puts the container into CrashLoopBackOff, before the status.
    await wait_for(kubesim, backing_off)
    event = next(e for e in await events_of(kubectl, "crashy") if e["reason"] == "BackOff")
    assert event["type"] == "Warning"
    assert (
        event["message"]
        == f"Back-off restarting failed container main in pod crashy_default({uid})"
    )
    rc, out, err = await kubectl("describe", "pod", "crashy")
    assert rc == 0, err
    assert "Back-off restarting failed container main" in out.split("\nEvents:", 1)[1]
