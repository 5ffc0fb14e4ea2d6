"""The composition root: KubeSim runs the simulated controllers, serves their routes, stops cleanly."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubesim_contract import pod

from kubesim.app import KubeSim
from kubesim.settings import SimSettings


@pytest.fixture
def kubesim_settings() -> SimSettings:
    return SimSettings(start_seconds=0.05, ready_seconds=0.05)


async def test_controllers_run_inside_the_started_cluster(kube_api: ApiClient, kubesim: KubeSim) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p"))
    for _ in range(100):
        if (await core.read_namespaced_pod("p", "default")).status.phase == "Running":
            break
        await asyncio.sleep(0.05)
    assert (await core.read_namespaced_pod("p", "default")).status.phase == "Running"
    assert kubesim.controllers.all


async def test_start_stop_and_context_manager() -> None:
    sim = KubeSim(run_controllers=False)
    async with sim:
        port = sim.port
        assert sim.url == f"http://127.0.0.1:{port}"
        with pytest.raises(RuntimeError):
            await sim.start()
    with pytest.raises(RuntimeError):
        _ = sim.url
    # the port is free again
    again = KubeSim(run_controllers=False)
    await again.start(port)
    await again.stop()
