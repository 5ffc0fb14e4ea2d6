"""The VolumeManager driving the process runtime's on-disk volumes through its sync listener.

A real kubesim (timer runtime: nothing here needs namespaces) whose VolumeManager calls
`volumefiles.setup` on a pod's first snapshot and `volumefiles.refresh` on every later one, into
tmp_path. The cluster runs on the fake clock (conftest.py): a periodic sync happens only when a test
advances time past it, so without that only a pod change can refresh the disk.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.controllers.volumes import SYNC_JITTER, PodKey, VolumeFiles
from kubesim.downward import format_map
from kubesim.procrt import volumefiles
from kubesim.settings import SimSettings

from ..controllers.controller_helpers import rt

SYNC = 30.0
"""Simulated seconds: a periodic sync lands one to 1 + SYNC_JITTER periods after the previous
one."""


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=0.0, volume_sync_seconds=SYNC)


@dataclass(frozen=True)
class Synced:
    key: PodKey
    first: bool
    changed: frozenset[str]
    written: frozenset[str]


class DiskVolumes:
    """What the process kubelet does with the listener: pod volumes under `<root>/<ns>/<name>/`."""

    def __init__(self, sim: KubeSim, root: Path) -> None:
        self.root = root
        self.calls: list[Synced] = []
        assert sim.controllers.volumes is not None
        sim.controllers.volumes.add_sync_listener(self)

    def __call__(self, key: PodKey, pod: Mapping[str, Any], files: VolumeFiles) -> None:
        pod_dir = self.pod_dir(*key)
        if files.first:
            volumefiles.setup(pod, pod_dir, files)
            written = frozenset(files)
        else:
            written = volumefiles.refresh(pod, pod_dir, files)
        self.calls.append(Synced(key, files.first, files.changed, written))

    def pod_dir(self, namespace: str, name: str) -> Path:
        return self.root / namespace / name

    def volume(self, volume: str, name: str = "launcher") -> Path:
        return self.pod_dir("default", name) / "volumes" / volume


@pytest.fixture
def disk(kubesim: KubeSim, tmp_path: Path) -> DiskVolumes:
    return DiskVolumes(kubesim, tmp_path / "pods")


VOLUMES = [
    {"name": "cfg", "configMap": {"name": "job-config"}},
    {
        "name": "info",
        "downwardAPI": {
            "items": [{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
        },
    },
]


def make_configmap(sim: KubeSim, hosts: str) -> None:
    body = {"metadata": {"name": "job-config"}, "data": {"hostfile": hosts}}
    sim.cluster.create(rt(sim, "v1", "ConfigMap"), "default", body)


def set_hosts(sim: KubeSim, hosts: str) -> None:
    cms = rt(sim, "v1", "ConfigMap")
    cm = sim.cluster.get(cms, "default", "job-config")
    cm["data"]["hostfile"] = hosts
    sim.cluster.update(cms, "default", "job-config", cm)


async def make_pod(sim: KubeSim, name: str = "launcher") -> None:
    """Creates the pod and lets the kubelet start it (start-seconds 0: at once)."""
    mounts = [
        {"name": "cfg", "mountPath": "/etc/mpi"},
        {"name": "info", "mountPath": "/etc/podinfo"},
    ]
    body = {
        "metadata": {"name": name, "annotations": {"example.com/v": "1"}},
        "spec": {
            "containers": [{"name": "main", "image": "mpi", "volumeMounts": mounts}],
            "volumes": VOLUMES,
        },
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), "default", body)
    await settle(sim)


async def settle(sim: KubeSim) -> None:
    assert isinstance(sim.controllers.clock, FakeClock)
    await sim.controllers.clock.settle()


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


async def patch_annotations(
    sim: KubeSim, annotations: dict[str, str | None], name: str = "launcher"
) -> None:
    """A merge patch over HTTP, as the operator touches a pod (None removes an annotation); returns
    once the kubelet has acted on it."""
    headers = {"Content-Type": "application/merge-patch+json"}
    body = {"metadata": {"annotations": annotations}}
    async with (
        aiohttp.ClientSession(sim.url) as http,
        http.patch(f"/api/v1/namespaces/default/pods/{name}", json=body, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
    await settle(sim)


async def test_configmap_change_reaches_the_disk_on_the_periodic_sync(
    kubesim: KubeSim, clock: FakeClock, disk: DiskVolumes
) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    await make_pod(kubesim)
    hostfile = disk.volume("cfg") / "hostfile"
    assert read(hostfile) == "w-0 slots=1\n"
    first = os.readlink(disk.volume("cfg") / "..data")
    assert disk.calls[0].first
    assert disk.calls[0].changed == {"cfg", "info"}

    set_hosts(kubesim, "w-0 slots=1\nw-1 slots=1\n")
    await clock.advance(SYNC - 0.01)
    assert read(hostfile) == "w-0 slots=1\n"
    await clock.advance(SYNC * SYNC_JITTER + 0.01)
    assert read(hostfile) == "w-0 slots=1\nw-1 slots=1\n"
    now = os.readlink(disk.volume("cfg") / "..data")
    assert now != first
    assert not (disk.volume("cfg") / first).exists()
    # Nobody touched the pod: the periodic sync did it, rewriting only the volume that changed.
    last = disk.calls[-1]
    assert (last.first, last.changed, last.written) == (
        False,
        frozenset({"cfg"}),
        frozenset({"cfg"}),
    )
    # Later periodic syncs change nothing on disk.
    count = len(disk.calls)
    await clock.advance(SYNC * (1 + SYNC_JITTER))
    assert len(disk.calls) > count
    assert disk.calls[-1].written == frozenset()
    assert os.readlink(disk.volume("cfg") / "..data") == now


async def test_pod_annotation_change_refreshes_at_once(kubesim: KubeSim, disk: DiskVolumes) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    await make_pod(kubesim)
    hostfile = disk.volume("cfg") / "hostfile"
    annotations = disk.volume("info") / "annotations"
    assert read(hostfile) == "w-0 slots=1\n"
    assert read(annotations) == 'example.com/v="1"'
    before = {v: os.readlink(disk.volume(v) / "..data") for v in ("cfg", "info")}

    set_hosts(kubesim, "w-1 slots=1\n")
    # What the operator does after changing a ConfigMap: touch the pod, so the kubelet resyncs it.
    await patch_annotations(kubesim, {"example.com/v": '2 "quoted"'})
    assert read(hostfile) == "w-1 slots=1\n"
    assert read(annotations) == format_map({"example.com/v": '2 "quoted"'})
    assert read(annotations) == 'example.com/v="2 \\"quoted\\""'
    for volume, target in before.items():
        assert os.readlink(disk.volume(volume) / "..data") != target
    assert disk.calls[-1].written == {"cfg", "info"}


async def test_downward_api_file_follows_annotation_patches(
    kubesim: KubeSim, disk: DiskVolumes
) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    await make_pod(kubesim)
    annotations = disk.volume("info") / "annotations"
    assert read(annotations) == 'example.com/v="1"'
    await patch_annotations(kubesim, {"example.com/hosts": "w-0,w-1", "example.com/v": None})
    assert read(annotations) == 'example.com/hosts="w-0,w-1"'
    last = disk.calls[-1]
    assert (last.changed, last.written) == (frozenset({"info"}), frozenset({"info"}))
    assert (disk.volume("cfg") / "hostfile").read_text() == "w-0 slots=1\n"


async def test_no_listener_call_after_the_pod_stopped(
    kubesim: KubeSim, clock: FakeClock, disk: DiskVolumes
) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    await make_pod(kubesim, "launcher")
    await make_pod(kubesim, "other")
    assert {c.key[1] for c in disk.calls} == {"launcher", "other"}
    assert kubesim.controllers.kubelet is not None
    kubesim.controllers.kubelet.evict("default", "launcher")
    count = len(disk.calls)
    await patch_annotations(kubesim, {"example.com/v": "2"}, "launcher")
    await patch_annotations(kubesim, {"example.com/v": "2"}, "other")
    assert [c.key[1] for c in disk.calls[count:]] == ["other"]
    # Nor on a periodic sync: the stopped pod has none left.
    await clock.advance(SYNC * (1 + SYNC_JITTER))
    assert {c.key[1] for c in disk.calls[count:]} == {"other"}
    assert read(disk.volume("info") / "annotations") == 'example.com/v="1"'
