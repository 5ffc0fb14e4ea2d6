"""`GET pods/{name}/log?follow=true` of a timer-runtime pod, on the fake clock: the stream stays open
while the container runs and ends with how the run ended, as a kubelet's stream ends when the
container does; a follow of a pod whose run is over answers at once."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.settings import SimSettings

LOG = "/api/v1/namespaces/default/pods/{}/log"
FOLLOW = {"follow": "true"}


@pytest.fixture
def kubesim_settings(clock: FakeClock) -> SimSettings:
    return SimSettings(clock=clock, start_seconds=1.0, ready_seconds=1.0)


def pod(name: str, run_seconds: int, exit_code: int) -> dict[str, object]:
    annotations = {"kubesim/run-seconds": str(run_seconds), "kubesim/exit-code": str(exit_code)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "example/main:1"}]},
    }


async def started(sim: KubeSim, clock: FakeClock, name: str, run_seconds: int, exit_code: int) -> None:
    pods = sim.cluster.registry.by_kind("v1", "Pod")
    assert pods is not None
    sim.cluster.create(pods, "default", pod(name, run_seconds, exit_code))
    await clock.advance(1.0)
    assert sim.cluster.get(pods, "default", name)["status"]["phase"] == "Running"


async def test_follow_ends_with_the_run(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    await started(sim, clock, "w", run_seconds=30, exit_code=3)
    async with sim_http.get(LOG.format("w"), params=FOLLOW) as response:
        assert response.status == 200
        first = [await response.content.readline() for _ in range(2)]
        assert first[1].decode().endswith("; running\n")
        rest = asyncio.create_task(response.content.read())
        await clock.advance(29.0)
        assert not rest.done(), "the container still runs: the stream stays open"
        await clock.advance(1.0)
        tail = (await asyncio.wait_for(rest, 30)).decode()
    assert tail.startswith("[kubesim] exited with code 3 (Error) at "), tail


async def test_follow_of_an_ended_run_answers_at_once(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    await started(sim, clock, "done", run_seconds=2, exit_code=0)
    await clock.advance(2.0)
    async with sim_http.get(
        "/api/v1/namespaces/default/pods/done/log", params={"follow": "true"}
    ) as response:
        text = await asyncio.wait_for(response.text(), 30)
    assert text.splitlines()[-1].startswith("[kubesim] exited with code 0 (Completed) at "), text
