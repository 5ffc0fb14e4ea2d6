"""Mounted ConfigMap volumes as a kubelet serves them, and the file endpoint over HTTP."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from sim_controller_helpers import eventually, fast_settings, rt

from kubesim.app import KubeSim
from kubesim.controllers.volumes import VolumeManager
from kubesim.settings import SimSettings


@pytest.fixture
def sim(kubesim: KubeSim) -> KubeSim:
    """The `kubesim` fixture's cluster, running with the settings above."""
    return kubesim


SYNC_SECONDS = 30.0  # simulated: the periodic sync lands 0.30-0.45 s (real) after the last one


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return fast_settings(volume_sync_seconds=SYNC_SECONDS)


@pytest.fixture
async def http(sim: KubeSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(sim.url) as session:
        yield session


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


def make_pod(
    sim: KubeSim,
    *,
    volume: dict[str, Any] = LAUNCHER_VOLUME,
    mounts: list[dict[str, Any]] | None = None,
    start: str = "0",
) -> None:
    mounts = mounts if mounts is not None else [{"name": volume["name"], "mountPath": "/etc/mpi"}]
    body = {
        "metadata": {"name": "launcher", "annotations": {"kubesim/start-seconds": start}},
        "spec": {
            "containers": [{"name": "launcher", "image": "mpi", "volumeMounts": mounts}],
            "volumes": [volume],
        },
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), "default", body)


def seen(sim: KubeSim, path: str = "/etc/mpi/discover_hosts.sh") -> str | None:
    found = volumes(sim).read_file("default", "launcher", path)
    return None if found is None else found.data.decode()


def touch_pod(sim: KubeSim, value: str) -> None:
    pods = rt(sim, "v1", "Pod")
    pod = sim.cluster.get(pods, "default", "launcher")
    pod["metadata"].setdefault("annotations", {})["example.com/touched"] = value
    sim.cluster.update(pods, "default", "launcher", pod)


async def test_file_endpoint_serves_the_mounted_file(sim: KubeSim, http: aiohttp.ClientSession) -> None:
    make_configmap(sim, "echo w-0:1\n")
    make_pod(sim)
    await eventually(lambda: seen(sim))
    async with http.get(
        "/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/discover_hosts.sh"
    ) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/plain"
        assert await resp.text() == "#!/bin/sh\necho w-0:1\n"
        assert resp.headers["X-Kubesim-File-Mode"] == "0555"
        assert resp.headers["X-Kubesim-Synced-At"].endswith("Z")
        assert resp.headers["Last-Modified"].endswith("GMT")
    async with http.get("/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/hostfile") as resp:
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
    sim: KubeSim, http: aiohttp.ClientSession, pod: str, path: str, start: str
) -> None:
    make_configmap(sim, "")
    make_pod(sim, start=start)
    await asyncio.sleep(0.05)
    async with http.get(f"/kubesim/v1/namespaces/default/pods/{pod}/files/{path}") as resp:
        assert resp.status == 404
        body = await resp.json()
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 404, "NotFound")


FILE_URL = "/kubesim/v1/namespaces/default/pods/launcher/files/etc/mpi/discover_hosts.sh"


async def served(http: aiohttp.ClientSession) -> str | None:
    async with http.get(FILE_URL) as resp:
        return await resp.text() if resp.status == 200 else None


async def served_eventually(http: aiohttp.ClientSession, expected: str, within: float) -> None:
    deadline = time.monotonic() + within
    while (text := await served(http)) != expected:
        assert time.monotonic() < deadline, f"still {text!r}"
        await asyncio.sleep(0.002)


async def test_configmap_change_reaches_the_pod_at_the_sync_period(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    make_configmap(sim, "echo w-0:1\n")
    make_pod(sim)
    await served_eventually(http, "#!/bin/sh\necho w-0:1\n", within=2.0)
    changed_at = time.monotonic()
    set_hosts(sim, "echo w-0:1\necho w-1:1\n")
    await asyncio.sleep(0.15)
    assert await served(http) == "#!/bin/sh\necho w-0:1\n"
    await served_eventually(http, "#!/bin/sh\necho w-0:1\necho w-1:1\n", within=2.0)
    # The first periodic sync comes one jittered period (0.30-0.45 s here) after the pod started.
    assert time.monotonic() - changed_at > 0.2


async def test_pod_update_refreshes_the_view_within_100ms(sim: KubeSim, http: aiohttp.ClientSession) -> None:
    make_configmap(sim, "echo w-0:1\n")
    make_pod(sim)
    await served_eventually(http, "#!/bin/sh\necho w-0:1\n", within=2.0)
    await asyncio.sleep(0.05)
    set_hosts(sim, "echo w-1:1\n")
    started = time.monotonic()
    # What the operator does after changing discover_hosts.sh: touch an annotation on the launcher pod.
    touch = {"metadata": {"annotations": {"example.com/hosts-version": "2"}}}
    headers = {"Content-Type": "application/merge-patch+json"}
    async with http.patch("/api/v1/namespaces/default/pods/launcher", json=touch, headers=headers) as resp:
        assert resp.status == 200
    await served_eventually(http, "#!/bin/sh\necho w-1:1\n", within=1.0)
    assert time.monotonic() - started < 0.1
    synced = volumes(sim).read_file("default", "launcher", "/etc/mpi/discover_hosts.sh")
    assert synced is not None
    assert synced.changed_at == synced.synced_at


async def test_status_only_write_does_not_refresh(sim: KubeSim) -> None:
    make_configmap(sim, "echo w-0:1\n")
    make_pod(sim)
    pods = rt(sim, "v1", "Pod")
    await eventually(lambda: seen(sim))
    set_hosts(sim, "echo w-1:1\n")
    pod = sim.cluster.get(pods, "default", "launcher")
    extra = {"type": "example.com/Checked", "status": "True"}
    pod["status"]["conditions"] = [*pod["status"]["conditions"], extra]
    sim.cluster.update(pods, "default", "launcher", pod, subresource="status")
    await asyncio.sleep(0.1)
    assert seen(sim) == "#!/bin/sh\necho w-0:1\n"


async def test_projected_sources_and_subpath(sim: KubeSim) -> None:
    make_configmap(sim, "echo w-0:1\n")
    secret = {"metadata": {"name": "ssh"}, "data": {"id_rsa": base64.b64encode(b"KEY").decode()}}
    sim.cluster.create(rt(sim, "v1", "Secret"), "default", secret)
    volume = {
        "name": "both",
        "projected": {
            "defaultMode": 0o600,
            "sources": [
                {"configMap": {"name": "job-config", "items": [{"key": "hostfile", "path": "hostfile"}]}},
                {"secret": {"name": "ssh"}},
            ],
        },
    }
    mounts = [
        {"name": "both", "mountPath": "/etc/both"},
        {"name": "both", "mountPath": "/root/hostfile", "subPath": "hostfile"},
    ]
    make_pod(sim, volume=volume, mounts=mounts)
    await eventually(lambda: seen(sim, "/etc/both/hostfile"))
    key = volumes(sim).read_file("default", "launcher", "/etc/both/id_rsa")
    assert key is not None
    assert (key.data, key.mode) == (b"KEY", 0o600)
    assert seen(sim, "/root/hostfile") == "w-0 slots=1\n"
    cms = rt(sim, "v1", "ConfigMap")
    cm = sim.cluster.get(cms, "default", "job-config")
    cm["data"]["hostfile"] = "w-9 slots=1\n"
    sim.cluster.update(cms, "default", "job-config", cm)
    touch_pod(sim, "1")
    await eventually(lambda: seen(sim, "/etc/both/hostfile") == "w-9 slots=1\n")
    # A subPath mount is a copy made at container start: it never sees updates.
    assert seen(sim, "/root/hostfile") == "w-0 slots=1\n"


async def test_view_disappears_when_the_pod_stops(sim: KubeSim) -> None:
    make_configmap(sim, "")
    make_pod(sim)
    await eventually(lambda: seen(sim) is not None)
    assert sim.controllers.kubelet is not None
    sim.controllers.kubelet.evict("default", "launcher")
    assert seen(sim) is None
