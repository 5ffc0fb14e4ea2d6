"""The VolumeManager driving the process runtime's on-disk volumes through its sync listener.

A real kubesim (timer runtime: nothing here needs namespaces) whose VolumeManager calls
`volumefiles.setup` on a pod's first snapshot and `volumefiles.refresh` on every later one, into
tmp_path. The tests wait for listener calls (events, not sleeps) with generous timeouts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from sim_controller_helpers import fast_settings, rt

from kubesim.app import KubeSim
from kubesim.controllers.volumes import PodKey, VolumeFiles
from kubesim.downward import format_map
from kubesim.procrt import volumefiles
from kubesim.settings import SimSettings

T = TypeVar("T")

SHORT_SYNC = 30.0  # simulated seconds: 0.30-0.45 s real on the 100x clock
LONG_SYNC = 6000.0  # 60-90 s real: longer than any wait below, so only a pod change can refresh
WITHIN = 30.0


@pytest.fixture
def kubesim_settings(request: pytest.FixtureRequest) -> SimSettings:
    return fast_settings(volume_sync_seconds=getattr(request, "param", SHORT_SYNC))


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
        self._called = asyncio.Event()
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
        self._called.set()

    def pod_dir(self, namespace: str, name: str) -> Path:
        return self.root / namespace / name

    def volume(self, volume: str, name: str = "launcher") -> Path:
        return self.pod_dir("default", name) / "volumes" / volume

    async def until(self, check: Callable[[], T | None], within: float = WITHIN) -> T:
        """Re-checks after every listener call; nothing else changes the disk."""
        async with asyncio.timeout(within):
            while not (result := check()):
                self._called.clear()
                await self._called.wait()
        return result


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


def make_pod(sim: KubeSim, name: str = "launcher") -> None:
    mounts = [{"name": "cfg", "mountPath": "/etc/mpi"}, {"name": "info", "mountPath": "/etc/podinfo"}]
    body = {
        "metadata": {"name": name, "annotations": {"example.com/v": "1"}},
        "spec": {
            "containers": [{"name": "main", "image": "mpi", "volumeMounts": mounts}],
            "volumes": VOLUMES,
        },
    }
    sim.cluster.create(rt(sim, "v1", "Pod"), "default", body)


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


async def patch_annotations(sim: KubeSim, annotations: dict[str, str | None], name: str = "launcher") -> None:
    """A merge patch over HTTP, as the operator touches a pod (None removes an annotation)."""
    headers = {"Content-Type": "application/merge-patch+json"}
    body = {"metadata": {"annotations": annotations}}
    async with (
        aiohttp.ClientSession(sim.url) as http,
        http.patch(f"/api/v1/namespaces/default/pods/{name}", json=body, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()


async def test_configmap_change_reaches_the_disk_on_the_periodic_sync(
    kubesim: KubeSim, disk: DiskVolumes
) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    make_pod(kubesim)
    hostfile = disk.volume("cfg") / "hostfile"
    await disk.until(lambda: read(hostfile) == "w-0 slots=1\n")
    first = os.readlink(disk.volume("cfg") / "..data")
    assert disk.calls[0].first
    assert disk.calls[0].changed == {"cfg", "info"}

    set_hosts(kubesim, "w-0 slots=1\nw-1 slots=1\n")
    await disk.until(lambda: read(hostfile) == "w-0 slots=1\nw-1 slots=1\n")
    now = os.readlink(disk.volume("cfg") / "..data")
    assert now != first
    assert not (disk.volume("cfg") / first).exists()
    # Nobody touched the pod: the periodic sync did it, rewriting only the volume that changed.
    last = disk.calls[-1]
    assert (last.first, last.changed, last.written) == (False, frozenset({"cfg"}), frozenset({"cfg"}))
    # Later periodic syncs change nothing on disk.
    count = len(disk.calls)
    await disk.until(lambda: len(disk.calls) > count)
    assert disk.calls[-1].written == frozenset()
    assert os.readlink(disk.volume("cfg") / "..data") == now


@pytest.mark.parametrize("kubesim_settings", [LONG_SYNC], indirect=True)
async def test_pod_annotation_change_refreshes_at_once(kubesim: KubeSim, disk: DiskVolumes) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    make_pod(kubesim)
    hostfile = disk.volume("cfg") / "hostfile"
    annotations = disk.volume("info") / "annotations"
    await disk.until(lambda: read(hostfile) == "w-0 slots=1\n")
    assert read(annotations) == 'example.com/v="1"'
    before = {v: os.readlink(disk.volume(v) / "..data") for v in ("cfg", "info")}

    set_hosts(kubesim, "w-1 slots=1\n")
    # What the operator does after changing a ConfigMap: touch the pod, so the kubelet resyncs it.
    await patch_annotations(kubesim, {"example.com/v": '2 "quoted"'})
    await disk.until(lambda: read(hostfile) == "w-1 slots=1\n")
    assert read(annotations) == format_map({"example.com/v": '2 "quoted"'})
    assert read(annotations) == 'example.com/v="2 \\"quoted\\""'
    for volume, target in before.items():
        assert os.readlink(disk.volume(volume) / "..data") != target
    assert disk.calls[-1].written == {"cfg", "info"}


@pytest.mark.parametrize("kubesim_settings", [LONG_SYNC], indirect=True)
async def test_downward_api_file_follows_annotation_patches(kubesim: KubeSim, disk: DiskVolumes) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    make_pod(kubesim)
    annotations = disk.volume("info") / "annotations"
    await disk.until(lambda: read(annotations) == 'example.com/v="1"')
    await patch_annotations(kubesim, {"example.com/hosts": "w-0,w-1", "example.com/v": None})
    await disk.until(lambda: read(annotations) == 'example.com/hosts="w-0,w-1"')
    last = disk.calls[-1]
    assert (last.changed, last.written) == (frozenset({"info"}), frozenset({"info"}))
    assert (disk.volume("cfg") / "hostfile").read_text() == "w-0 slots=1\n"


@pytest.mark.parametrize("kubesim_settings", [LONG_SYNC], indirect=True)
async def test_no_listener_call_after_the_pod_stopped(kubesim: KubeSim, disk: DiskVolumes) -> None:
    make_configmap(kubesim, "w-0 slots=1\n")
    make_pod(kubesim, "launcher")
    make_pod(kubesim, "other")
    await disk.until(lambda: {c.key[1] for c in disk.calls} == {"launcher", "other"})
    assert kubesim.controllers.kubelet is not None
    kubesim.controllers.kubelet.evict("default", "launcher")
    count = len(disk.calls)
    await patch_annotations(kubesim, {"example.com/v": "2"}, "launcher")
    await patch_annotations(kubesim, {"example.com/v": "2"}, "other")
    # One worker takes the queued pods in order: once "other" is refreshed, "launcher" was looked at.
    await disk.until(lambda: any(c.key[1] == "other" for c in disk.calls[count:]))
    assert [c.key[1] for c in disk.calls[count:]] == ["other"]
    assert read(disk.volume("info") / "annotations") == 'example.com/v="1"'
