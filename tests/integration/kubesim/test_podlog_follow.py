"""`GET pods/{name}/log?follow=true` of a timer-runtime pod, on the fake clock: the stream stays
open while the container runs and ends with how the run ended, as a kubelet's stream ends when the
container does; a follow of a pod whose run is over answers at once."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import kubernetes
import pytest

from kubesim.app import KubeSim
from kubesim.clock import FakeClock
from kubesim.query import FALSE, TRUE
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
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "example/main:1"}],
        },
    }


async def started(
    sim: KubeSim, clock: FakeClock, name: str, run_seconds: int, exit_code: int
) -> None:
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


async def _body_after_the_run(
    response: aiohttp.ClientResponse, clock: FakeClock, run: float
) -> str:
    """The whole body, read after the container's run ended: a followed log includes the end, a
    plain one was complete when the request was answered."""
    await clock.advance(run)
    return (await asyncio.wait_for(response.read(), 30)).decode()


@pytest.mark.parametrize("spelling", sorted(TRUE), ids=lambda s: f"follow={s}")
async def test_every_true_spelling_of_follow_follows(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession, spelling: str
) -> None:
    await started(sim, clock, "w", run_seconds=10, exit_code=0)
    async with sim_http.get(LOG.format("w"), params={"follow": spelling}) as response:
        assert response.status == 200
        text = await _body_after_the_run(response, clock, 10.0)
    assert "[kubesim] exited with code 0 (Completed) at " in text, text


@pytest.mark.parametrize("spelling", sorted(FALSE), ids=lambda s: f"follow={s}")
async def test_every_false_spelling_of_follow_answers_at_once(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession, spelling: str
) -> None:
    await started(sim, clock, "w", run_seconds=10, exit_code=0)
    async with sim_http.get(LOG.format("w"), params={"follow": spelling}) as response:
        text = await _body_after_the_run(response, clock, 10.0)
    assert text.splitlines()[-1].endswith("; running"), text


async def test_a_boolean_that_go_would_not_parse_is_a_400(
    sim: KubeSim, clock: FakeClock, sim_http: aiohttp.ClientSession
) -> None:
    await started(sim, clock, "w", run_seconds=10, exit_code=0)
    async with sim_http.get(LOG.format("w"), params={"follow": "yes"}) as response:
        assert response.status == 400
        assert (await response.json())["message"] == 'invalid boolean value for follow: "yes"'


async def test_the_official_python_client_follows_a_log(sim: KubeSim, clock: FakeClock) -> None:
    """`read_namespaced_pod_log(..., follow=True)` sends `follow=True`, as the Kubeflow SDK does."""
    await started(sim, clock, "w", run_seconds=10, exit_code=0)
    api = kubernetes.client.CoreV1Api(
        kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    )

    def open_log() -> Any:
        return api.read_namespaced_pod_log("w", "default", follow=True, _preload_content=False)

    response = await asyncio.to_thread(open_log)
    try:
        await clock.advance(10.0)
        text = (await asyncio.wait_for(asyncio.to_thread(response.read), 30)).decode()
    finally:
        response.release_conn()
        api.api_client.close()
    assert "[kubesim] exited with code 0 (Completed) at " in text, text
