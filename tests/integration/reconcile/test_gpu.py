"""GPU pass-through through the API (upstream `TestNewLauncherAndWorker` launcher-as-worker): worker
template resources reach the pods untouched, slots default to the per-worker GPU count when
slotsPerWorker is unset, the launcher gets blank NVIDIA variables and no GPUs, unless it runs as a
worker (then no blanking, and it is the first hostfile entry)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.testing import eventually
from mpi_operator.kube import resources
from mpi_operator.kube.client import Kube
from mpi_operator.runtime.manager import Manager

from .harness import NS, list_names, mpijob, pods_of

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
