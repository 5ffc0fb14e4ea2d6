"""The composition root: KubeSim runs the simulated controllers, serves their routes, stops
cleanly."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from kubesim.app import KubeSim
from kubesim.clock import Clock, FakeClock
from kubesim.settings import SimSettings
from kubesim.testing import wait_for

from .kubesim_contract import pod


@pytest.fixture
def kubesim_settings() -> SimSettings:
    # Real time, as `mpi-operator sim` runs: the one place in this tier where the controllers'
    # timers are the event loop's own.
    return SimSettings(start_seconds=0.05, ready_seconds=0.05)


async def test_controllers_run_inside_the_started_cluster(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    assert type(kubesim.controllers.clock) is Clock
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p"))
    pods = kubesim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await wait_for(
        kubesim, lambda: kubesim.cluster.get(pods, "default", "p")["status"]["phase"] == "Running"
    )
    assert (await core.read_namespaced_pod("p", "default")).status.phase == "Running"
    assert kubesim.controllers.all


async def test_the_controllers_endpoint_counts_syncs_and_their_cpu(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p"))
    pods = kubesim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    await wait_for(
        kubesim, lambda: kubesim.cluster.get(pods, "default", "p")["status"]["phase"] == "Running"
    )
    async with (
        aiohttp.ClientSession(kubesim.url) as session,
        session.get("/kubesim/v1/controllers") as resp,
    ):
        stats = (await resp.json())["controllers"]
    assert {"scheduler", "kubelet"} <= set(stats)
    assert stats["kubelet"]["syncs"] >= 2  # started, then ready
    assert stats["kubelet"]["cpuSeconds"] >= 0.0


async def test_a_clock_in_the_settings_drives_the_controllers() -> None:
    clock = FakeClock()
    async with KubeSim(SimSettings(clock=clock)) as sim:
        assert sim.controllers.clock is clock
        pods = sim.cluster.registry.by_kind("v1", "Pod")
        assert pods is not None
        sim.cluster.create(pods, "default", pod("p"))
        await clock.advance(1)
        assert sim.cluster.get(pods, "default", "p")["status"]["phase"] == "Running"


async def test_the_process_runtime_refuses_a_fake_clock() -> None:
    with pytest.raises(ValueError, match="real time"):
        KubeSim(SimSettings(clock=FakeClock(), runtime="process"))


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
