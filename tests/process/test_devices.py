"""GPUs reach the process as the NVIDIA device plugin gives them: NVIDIA_VISIBLE_DEVICES holds the
allocated ids; a container without a request keeps its image's value; the PodResources listing
says what each container would see; an MPIJob's workers each see their own GPUs and its launcher its
own or none, whatever the image says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.devices import gpu_id
from kubesim.images import ImageCatalog, ImageSpec
from kubesim.settings import SimSettings
from kubesim.testing import Kubectl, wait_for

from .mpi_e2e import run_mpijob
from .mpi_images import catalog
from .procrt_helpers import PROCESS_TIME_SCALE, create, log_text, phase, pod, shell

CUDA = "example/cuda:12"
"""An image that sets NVIDIA_VISIBLE_DEVICES=all, as NVIDIA's CUDA images do."""


@pytest.fixture
def kubesim_settings(process_runtime: None) -> SimSettings:
    cuda = ImageCatalog({CUDA: ImageSpec(env=(("NVIDIA_VISIBLE_DEVICES", "all"),))})
    return SimSettings(
        runtime="process", time_scale=PROCESS_TIME_SCALE, images=catalog().merged(cuda)
    )


async def test_allocated_ids_reach_the_process(kubesim: KubeSim) -> None:
    show = 'echo "[${NVIDIA_VISIBLE_DEVICES-unset}]"'
    gpus = shell("gpus", show, resources={"limits": {"nvidia.com/gpu": "2"}})
    plain = shell("plain", show)
    cuda = {**shell("cuda", show), "image": CUDA}
    create(kubesim, pod("gpu", gpus, plain, cuda, restartPolicy="Never"))
    await wait_for(kubesim, lambda: phase(kubesim, "gpu") == "Succeeded")

    node = "kubesim-node"
    ids = [gpu_id(node, 0), gpu_id(node, 1)]
    assert log_text(kubesim, "gpu", "gpus").strip() == f"[{','.join(ids)}]"
    assert log_text(kubesim, "gpu", "plain").strip() == "[unset]"
    assert log_text(kubesim, "gpu", "cuda").strip() == "[all]"

    # Ended: the ids are free again, and the next pod gets the same ones.
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    assert kubelet.devices.allocation(("default", "gpu")) == {}
    create(kubesim, pod("again", gpus, restartPolicy="Never"))
    await wait_for(kubesim, lambda: phase(kubesim, "again") == "Succeeded")
    assert log_text(kubesim, "again").strip() == f"[{','.join(ids)}]"


async def test_pod_resources_says_what_each_running_container_sees(kubesim: KubeSim) -> None:
    gpus = shell("gpus", "sleep 60", resources={"limits": {"nvidia.com/gpu": "1"}})
    cuda = {**shell("cuda", "sleep 60"), "image": CUDA}
    voided = {
        **cuda,
        "name": "voided",
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
    }
    create(kubesim, pod("running", gpus, cuda, voided))
    await wait_for(kubesim, lambda: phase(kubesim, "running") == "Running")
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    [listed] = kubelet.pod_resources("kubesim-node")["podResources"]
    seen = {c["name"]: c["nvidiaVisibleDevices"] for c in listed["containers"]}
    node_ids = [gpu_id("kubesim-node", i) for i in range(8)]
    assert seen == {"gpus": node_ids[:1], "cuda": node_ids, "voided": []}


def gpu_job(name: str, launcher_gpus: int, as_worker: bool) -> dict[str, Any]:
    def main(role: str, command: str, gpus: int) -> dict[str, Any]:
        limits = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
        show = f'echo "{role}=[${{NVIDIA_VISIBLE_DEVICES-unset}}]"; {command}'
        return {**shell(role, show), "image": CUDA, "resources": limits}

    def replica(container: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {**extra, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "runLauncherAsWorker": as_worker,
            "mpiReplicaSpecs": {
                "Launcher": replica(main("launcher", "true", launcher_gpus), replicas=1),
                "Worker": replica(main("worker", "sleep 600", 2), replicas=2),
            },
        },
    }


@pytest.mark.parametrize(
    ("launcher_gpus", "as_worker"), [(0, False), (1, True)], ids=["launcher", "launcher-as-worker"]
)
async def test_an_mpijobs_processes_see_their_own_gpus(
    kubesim: KubeSim, kubectl: Kubectl, mpi_operator: Path, launcher_gpus: int, as_worker: bool
) -> None:
    """Every image says `all`: each worker process sees its two GPUs and no other's, the launcher
    process its own one or none."""
    launcher_log = await run_mpijob(kubectl, gpu_job("gpus", launcher_gpus, as_worker))
    seen = {f"gpus-worker-{i}": log_text(kubesim, f"gpus-worker-{i}").strip() for i in range(2)}
    ids = [v.removeprefix("worker=[").removesuffix("]").split(",") for v in seen.values()]
    assert all(len(mine) == 2 for mine in ids), seen
    assert not set(ids[0]) & set(ids[1]), seen
    line = next(x for x in launcher_log.splitlines() if x.startswith("launcher="))
    own = line.removeprefix("launcher=[").removesuffix("]")
    if launcher_gpus:
        assert len(own.split(",")) == 1, line
        assert own not in {*ids[0], *ids[1]}, line
    else:
        assert own == "", line
