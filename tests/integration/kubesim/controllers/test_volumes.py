"""Mounted ConfigMap volumes as a kubelet serves them, and the file endpoint over HTTP.

The cluster runs on the fake clock (conftest.py): a periodic sync happens only when a test advances
time past it, so "not refreshed yet" and "refreshed without waiting for a sync" are exact checks.
"""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.controllers.volumes import SYNC_JITTER, VolumeManager
from kubesim.settings import SimSettings

from .controller_helpers import rt

SYNC_SECONDS = 30.0
"""Simulated: a periodic sync lands one to 1 + SYNC_JITTER periods after the previous one."""


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, volume_sync_seconds=SYNC_SECONDS)


def volumes(sim: KubeSim) -> VolumeManager:
    assert sim.controllers.volumes is not None
    return sim.controllers.volumes


LAUNCHER_VOLUME = {
    "name": "mpi-job-config",
    "configMap": {
        "name": "job-config",
        "items": [
            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
        ],
    },
}


def make_configmap(sim: KubeSim, hosts: str) -> None:
    data = {"hostfile": "w-0 slots=1\n", "discover_hosts.sh": f"#!/bin/sh\n{hosts}"}
    sim.cluster.create(
        rt(sim, "v1", "ConfigMap"), "default", {"metadata": {"name": "job-config"}, "data": data}
    )


def set_hosts(sim: KubeSim, hosts: str) -> None:
    cms = rt(sim, "v1", "ConfigMap")
    cm = sim.cluster.get(cms, "default", "job-config")
    cm["data"]["discover_hosts.sh"] = f"#!/bin/sh\n{hosts}"
    sim.cluster.update(cms, "default", "job-config", cm)


async def make_pod(
    sim: KubeSim,
    *,
    volume: dict[str, Any] = LAUNCHER_VOLUME,
    mounts: list[dict[str, Any]] | None = None,
    start: str = "0",
) -> None:
    """Creates the launcher pod and lets the kubelet start it (`start` simulated seconds: 0, at
    once)."""
    mounts = mounts if mounts is not None else [{"name": volume["name"], "mountPath": "/etc/mpi"}]
    body = {
        "metadata": {"name": "launcher", "annotations": {"kubesim/start-seconds": start}},
        "spec": {
            "containers": [{"name": "launcher", "image": "mpi", "volumeMounts": mounts}],
            "volumes": [volume],
        },
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), "default", body)
    await fake_clock(sim).settle()


def fake_clock(sim: KubeSim) -> FakeClock:
    assert isinstance(sim.controllers.clock, FakeClock)
    return sim.controllers.clock


def seen(sim: KubeSim, path: str = "/etc/mpi/discover_hosts.sh") -> str | None:
    found = volumes(sim).read_file("default", "launcher", path)
    return None if found is None else found.data.decode()


def touch_pod(sim: KubeSim, value: str) -> None:
    pods = rt(sim, "v1", "Pod")
    pod = sim.cluster.get(pods, "default", "launcher")
    pod["metadata"].setdefault("annotations", {})["example.com/touched"] = value
    sim.cluster.update(pods, "default", "launcher", pod)


async def test_file_endpoint_serves_the_mounted_file(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    make_configmap(sim, "echo w-0:1\n")
    await make_pod(sim)
    assert seen(sim)
    async with sim_http.get(
        "/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/discover_hosts.sh"
    ) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/plain"
        assert await resp.text() == "#!/bin/sh\necho w-0:1\n"
        assert resp.headers["X-Kubesim-File-Mode"] == "0555"
        assert resp.headers["X-Kubesim-Synced-At"].endswith("Z")
        assert resp.headers["Last-Modified"].endswith("GMT")
    async with sim_http.get(
        "/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/hostfile"
    ) as resp:
        assert resp.headers["X-Kubesim-File-Mode"] == "0444"
        assert await resp.text() == "w-0 slots=1\n"


@pytest.mark.parametrize(
    ("pod", "path", "start"),
    [
        ("nobody", "etc/mpi/hostfile", "0"),
        ("launcher", "etc/mpi/missing", "0"),
        ("launcher", "etc/other/hostfile", "0"),
        ("launcher", "etc/mpi/hostfile", "1000"),
    ],
    ids=["unknown-pod", "unknown-file", "unmounted-path", "pod-not-running-yet"],
)
async def test_file_endpoint_404(
    sim: KubeSim, sim_http: aiohttp.ClientSession, pod: str, path: str, start: str
) -> None:
    make_configmap(sim, "")
    await make_pod(sim, start=start)
    async with sim_http.get(f"/kubesim/v1/namespaces/default/pods/{pod}/files/{path}") as resp:
        assert resp.status == 404
        body = await resp.json()
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 404, "NotFound")


FILE_URL = "/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/discover_hosts.sh"


async def served(http: aiohttp.ClientSession) -> str | None:
    async with http.get(FILE_URL) as resp:
        return await resp.text() if resp.status == 200 else None


async def test_configmap_change_reaches_the_pod_at_the_sync_period(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    make_configmap(sim, "echo w-0:1\n")
    await make_pod(sim)
    assert await served(sim_http) == "#!/bin/sh\necho w-0:1\n"
    set_hosts(sim, "echo w-0:1\necho w-1:1\n")
    # Nothing touches the pod: the change waits for the first periodic sync, one jittered period
    # after the pod started (at 0).
    await clock.advance(SYNC_SECONDS - 0.01)
    assert await served(sim_http) == "#!/bin/sh\necho w-0:1\n"
    await clock.advance(SYNC_SECONDS * SYNC_JITTER + 0.01)
    assert await served(sim_http) == "#!/bin/sh\necho w-0:1\necho w-1:1\n"
    synced = volumes(sim).read_file("default", "launcher", "/etc/mpi/discover_hosts.sh")
    assert synced is not None
    assert SYNC_SECONDS <= synced.changed_at <= SYNC_SECONDS * (1 + SYNC_JITTER)


async def test_pod_update_refreshes_the_view_at_once(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    make_configmap(sim, "echo w-0:1\n")
    await make_pod(sim)
    assert await served(sim_http) == "#!/bin/sh\necho w-0:1\n"
    await clock.advance(1)
    set_hosts(sim, "echo w-1:1\n")
    # What the operator does after changing discover_hosts.sh: touch an annotation on the launcher
    # pod.
    touch = {"metadata": {"annotations": {"example.com/hosts-version": "2"}}}
    headers = {"Content-Type": "application/merge-patch+json"}
    async with sim_http.patch(
        "/api/v1/namespaces/default/pods/launcher", json=touch, headers=headers
    ) as resp:
        assert resp.status == 200
    await clock.settle()
    assert await served(sim_http) == "#!/bin/sh\necho w-1:1\n"
    synced = volumes(sim).read_file("default", "launcher", "/etc/mpi/discover_hosts.sh")
    assert synced is not None
    # Refreshed by the pod event itself, at the moment of the touch, long before a periodic sync.
    assert synced.changed_at == synced.synced_at == clock.now() == 1.0


async def test_status_only_write_does_not_refresh(sim: KubeSim, clock: FakeClock) -> None:
    make_configmap(sim, "echo w-0:1\n")
    await make_pod(sim)
    pods = rt(sim, "v1", "Pod")
    assert seen(sim)
    set_hosts(sim, "echo w-1:1\n")
    pod = sim.cluster.get(pods, "default", "launcher")
    extra = {"type": "example.com/Checked", "status": "True"}
    pod["status"]["conditions"] = [*pod["status"]["conditions"], extra]
    sim.cluster.update(pods, "default", "launcher", pod, subresource="status")
    await clock.advance(SYNC_SECONDS - 0.01)
    assert seen(sim) == "#!/bin/sh\necho w-0:1\n"


async def test_projected_sources_and_subpath(sim: KubeSim, clock: FakeClock) -> None:
    make_configmap(sim, "echo w-0:1\n")
    secret = {"metadata": {"name": "ssh"}, "data": {"id_rsa": base64.b64encode(b"KEY").decode()}}
    sim.cluster.create(rt(sim, "v1", "Secret"), "default", secret)
    volume = {
        "name": "both",
        "projected": {
            "defaultMode": 0o600,
            "sources": [
                {
                    "configMap": {
                        "name": "job-config",
                        "items": [{"key": "hostfile", "path": "hostfile"}],
                    }
                },
                {"secret": {"name": "ssh"}},
            ],
        },
    }
    mounts = [
        {"name": "both", "mountPath": "/etc/both"},
        {"name": "both", "mountPath": "/root/hostfile", "subPath": "hostfile"},
    ]
    await make_pod(sim, volume=volume, mounts=mounts)
    assert seen(sim, "/etc/both/hostfile")
    key = volumes(sim).read_file("default", "launcher", "/etc/both/id_rsa")
    assert key is not None
    assert (key.data, key.mode) == (b"KEY", 0o600)
    assert seen(sim, "/root/hostfile") == "w-0 slots=1\n"
    cms = rt(sim, "v1", "ConfigMap")
    cm = sim.cluster.get(cms, "default", "job-config")
    cm["data"]["hostfile"] = "w-9 slots=1\n"
    sim.cluster.update(cms, "default", "job-config", cm)
    touch_pod(sim, "1")
    await clock.settle()
    assert seen(sim, "/etc/both/hostfile") == "w-9 slots=1\n"
    # A subPath mount is a copy made at container start: it never sees updates.
    assert seen(sim, "/root/hostfile") == "w-0 slots=1\n"


async def test_view_disappears_when_the_pod_stops(sim: KubeSim) -> None:
    make_configmap(sim, "")
    await make_pod(sim)
    assert seen(sim) is not None
    assert sim.controllers.kubelet is not None
    sim.controllers.kubelet.evict("default", "launcher")
    assert seen(sim) is None
