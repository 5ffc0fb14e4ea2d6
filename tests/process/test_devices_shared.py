"""Time-sliced GPUs reach the process as the NVIDIA device plugin gives them: each share names its
GPU in NVIDIA_VISIBLE_DEVICES, so containers on one GPU see the same id, and a container holding
two shares of one GPU sees it once."""

from __future__ import annotations

import pytest

from kubesim.app import KubeSim
from kubesim.devices import gpu_id
from kubesim.nodes import NodeShape
from kubesim.settings import SimSettings
from kubesim.testing import wait_for

from .mpi_images import catalog
from .procrt_helpers import PROCESS_TIME_SCALE, create, log_text, phase, pod, shell

NODE = NodeShape("shared-1", {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"}, gpu_replicas=2)
SHOW = 'echo "[${NVIDIA_VISIBLE_DEVICES-unset}]"'


@pytest.fixture
def kubesim_settings(process_runtime: None) -> SimSettings:
    return SimSettings(
        runtime="process", time_scale=PROCESS_TIME_SCALE, images=catalog(), nodes=(NODE,)
    )


def shares(name: str, count: int) -> dict[str, object]:
    return shell(name, SHOW, resources={"limits": {"nvidia.com/gpu": str(count)}})


async def test_shares_of_one_gpu_reach_each_process_as_that_gpu(kubesim: KubeSim) -> None:
    create(kubesim, pod("two", shares("a", 1), shares("b", 1), restartPolicy="Never"))
    await wait_for(kubesim, lambda: phase(kubesim, "two") == "Succeeded")
    gpu = f"[{gpu_id('shared-1', 0)}]"
    assert (log_text(kubesim, "two", "a").strip(), log_text(kubesim, "two", "b").strip()) == (
        gpu,
        gpu,
    )
    create(kubesim, pod("both", shares("c", 2), restartPolicy="Never"))
    await wait_for(kubesim, lambda: phase(kubesim, "both") == "Succeeded")
    assert log_text(kubesim, "both").strip() == gpu
