"""kubesim answers like an API server with API Priority and Fairness: every answer (a watch stream's
too, whose headers go out before its events, and a 429 under load) carries the `X-Kubernetes-PF-*`
headers clients read to leave flow control to the server; a control switch takes them away."""

from __future__ import annotations

import aiohttp
import pytest

from kubesim.app import KubeSim

APF = ("X-Kubernetes-PF-FlowSchema-UID", "X-Kubernetes-PF-PriorityLevel-UID")


def apf_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    return {name: response.headers[name] for name in APF if name in response.headers}


async def test_answers_carry_the_flow_schema_and_priority_level(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    async with sim_http.get("/api/v1/namespaces/default") as ok:
        assert ok.status == 200
        found = apf_headers(ok)
    assert set(found) == set(APF)
    assert len(set(found.values())) == 2, "a flow schema and a priority level are two objects"
    async with sim_http.get("/api/v1/namespaces/nope") as missing:
        assert missing.status == 404
        assert apf_headers(missing) == found, "errors are classified too, into the same flow"
    async with sim_http.get(
        "/api/v1/pods", params={"watch": "true", "timeoutSeconds": "1"}
    ) as watch:
        assert watch.status == 200
        assert apf_headers(watch) == found, (
            "a watch stream's headers are sent before its first event"
        )


@pytest.mark.kubesim_control
async def test_a_429_under_load_says_when_to_come_back(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    sim.control.inject_error(429, method="GET", path="/namespaces/default$", retry_after=7)
    async with sim_http.get("/api/v1/namespaces/default") as throttled:
        assert throttled.status == 429
        assert throttled.headers["Retry-After"] == "7"
        assert set(apf_headers(throttled)) == set(APF)


@pytest.mark.kubesim_control
async def test_a_server_without_priority_and_fairness_sends_no_such_headers(
    sim: KubeSim, sim_http: aiohttp.ClientSession
) -> None:
    sim.control.priority_and_fairness = False
    async with sim_http.get("/api/v1/namespaces/default") as ok:
        assert ok.status == 200
        assert apf_headers(ok) == {}
