"""GPU pass-through through the API (upstream `TestNewLauncherAndWorker` launcher-as-worker): worker
template resources reach the pods untouched, slots default to the per-worker GPU count when
slotsPerWorker is unset, the launcher gets blank NVIDIA variables and no GPUs unless it asks for
them (as a worker it is the first hostfile entry). What each container then sees is read from
kubesim's PodResources listing, with an image that sets NVIDIA_VISIBLE_DEVICES=all as CUDA's do."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.images import ImageCatalog, ImageSpec
from kubesim.settings import SimSettings
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, container, list_names, mpijob, pods_of

CUDA = "example/cuda:12"


@pytest.fixture
def kubesim_settings(kubesim_settings: SimSettings) -> SimSettings:
    """The tier's kubesim with an image that names every GPU, as NVIDIA's CUDA images do."""
    cuda = ImageCatalog({CUDA: ImageSpec(env=(("NVIDIA_VISIBLE_DEVICES", "all"),))})
    return dataclasses.replace(kubesim_settings, images=kubesim_settings.images.merged(cuda))


GPU_WORKER = {
    "name": "main",
    "image": "horovod:gpu",
    "resources": {
        "limits": {"nvidia.com/gpu": "2", "example.com/fpga": "1"},
        "requests": {"cpu": "4"},
    },
}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


async def launcher_job(kube: Kube) -> dict[str, Any]:
    async def get() -> dict[str, Any] | None:
        items, _ = await kube.list(resources.JOB, NS)
        return items[0] if items else None

    return await eventually(get, what="the launcher Job")


@pytest.mark.parametrize(
    ("slots", "expected_slots"), [(None, 2), (1, 1)], ids=["slots-from-gpus", "explicit-slots"]
)
async def test_gpu_limits_reach_workers_and_slots_follow_them(
    kubesim: KubeSim, kube: Kube, operator: Manager, slots: int | None, expected_slots: int
) -> None:
    spec: dict[str, Any] = {} if slots is None else {"slotsPerWorker": slots}
    await kube.create(resources.MPIJOB, mpijob("pi", worker_container=GPU_WORKER, **spec))
    job = await launcher_job(kube)
    workers = await pods_of(kube, "pi", "worker")
    assert sorted(p["metadata"]["name"] for p in workers) == ["pi-worker-0", "pi-worker-1"]
    for pod in workers:
        got = pod["spec"]["containers"][0]["resources"]
        assert got["limits"] == GPU_WORKER["resources"]["limits"]
        assert (
            got["requests"]["cpu"] == "4"
        )  # the API server copies extended-resource limits to requests

    config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
    assert config["data"]["hostfile"] == "".join(
        f"pi-worker-{i}.pi.default.svc slots={expected_slots}\n" for i in range(2)
    )
    main = job["spec"]["template"]["spec"]["containers"][0]
    env = env_of(main)
    assert env["OMPI_MCA_orte_set_default_slots"] == str(expected_slots)
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == ""
    assert "nvidia.com/gpu" not in str(main.get("resources", {}))
    assert kubesim.control.warnings() == []


async def test_launcher_as_worker_keeps_gpus_visible(kube: Kube, operator: Manager) -> None:
    body = mpijob(
        "pi",
        workers=1,
        worker_container=GPU_WORKER,
        launcher_container=GPU_WORKER,
        runLauncherAsWorker=True,
    )
    await kube.create(resources.MPIJOB, body)
    job = await launcher_job(kube)
    env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    assert "NVIDIA_VISIBLE_DEVICES" not in env
    assert (
        job["spec"]["template"]["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "0"
    )
    config = await kube.get(resources.CONFIG_MAP, "pi-config", NS)
    assert config["data"]["hostfile"].splitlines() == [
        "pi-launcher slots=2",
        "pi-worker-0.pi.default.svc slots=2",
    ]
    worker = await kube.get(resources.POD, "pi-worker-0", NS)
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    service = await kube.get(resources.SERVICE, "pi", NS)
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert await list_names(kube, resources.POD, "mpi_job_name=pi,mpi_role_type=worker") == [
        "pi-worker-0"
    ]


@pytest.mark.parametrize(
    ("launcher_gpus", "as_worker"),
    [(0, False), (0, True), (1, True)],
    ids=["launcher", "launcher-as-worker-without-gpus", "launcher-as-worker-with-a-gpu"],
)
async def test_each_pod_sees_exactly_the_gpus_it_was_given(
    kubesim: KubeSim, kube: Kube, operator: Manager, launcher_gpus: int, as_worker: bool
) -> None:
    """On one node, every container's image says `all`: each worker sees its own two GPUs (the
    device plugin's variable overrides the image's), and the launcher sees its own or none."""

    def cuda(name: str, gpus: int) -> dict[str, Any]:
        limits = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
        return container(name, image=CUDA, resources=limits)

    body = mpijob(
        "gpus",
        worker_container=cuda("worker", 2),
        launcher_container=cuda("launcher", launcher_gpus),
        runLauncherAsWorker=as_worker,
    )
    await kube.create(resources.MPIJOB, body)
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None

    async def listed() -> dict[str, dict[str, Any]] | None:
        pods = kubelet.pod_resources(kubesim.settings.node_name)["podResources"]
        found = {p["name"]: p["containers"][0] for p in pods if p["name"].startswith("gpus-")}
        return found if len(found) == 3 else None

    found = await eventually(listed, what="the launcher and both workers on the node")
    seen: set[str] = set()
    for name, entry in found.items():
        given = [i for d in entry["devices"] for i in d["deviceIds"]]
        assert entry["nvidiaVisibleDevices"] == given, name
        assert len(given) == (launcher_gpus if name.startswith("gpus-launcher") else 2), name
        assert not seen & set(given), f"{name} shares a GPU"
        seen |= set(given)
