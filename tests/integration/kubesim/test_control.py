"""kubesim's test-control handle: injected faults change nothing, latency, recording, warnings,
fault rate."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.app import KubeSim
from kubesim.settings import SimSettings
from kubesim.testing import eventually

from .kubesim_contract import configmap, status_of

pytestmark = pytest.mark.kubesim_control


@pytest.fixture
def kubesim_run_controllers() -> bool:
    return False


@pytest.mark.parametrize("code", [500, 503, 409], ids=["500", "503", "409"])
async def test_injected_error_changes_nothing(
    kube_api: ApiClient, kubesim: KubeSim, code: int
) -> None:
    core = client.CoreV1Api(kube_api)
    rule = kubesim.control.inject_error(code, method="POST", path=r"/configmaps$")
    before = kubesim.control.resource_version
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", configmap("a"))
    assert err.value.status == code
    assert status_of(err.value)["code"] == code
    assert kubesim.control.resource_version == before
    assert (await core.list_namespaced_config_map("default")).items == []
    await core.create_namespaced_config_map("default", configmap("a"))  # the rule was used up
    assert rule.hits == 1


async def test_injected_429_carries_retry_after(kube_api: ApiClient, kubesim: KubeSim) -> None:
    kubesim.control.inject_error(429, path="/configmaps", count=None, retry_after=3)
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).list_namespaced_config_map("default")
    assert err.value.headers["Retry-After"] == "3"
    assert status_of(err.value)["details"]["retryAfterSeconds"] == 3
    kubesim.control.clear_faults()
    await client.CoreV1Api(kube_api).list_namespaced_config_map("default")


async def test_a_rule_for_one_client_and_writes_fails_only_those(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    """`user_agent` scopes a rule to one client, `method="WRITE"` to its writes: a chaos run fails
    the operator's requests while its own driver's go through."""
    core = client.CoreV1Api(kube_api)
    kube_api.user_agent = "chaos-driver"
    rule = kubesim.control.inject_error(503, method="WRITE", user_agent="victim/1", count=None)
    await core.create_namespaced_config_map(
        "default", configmap("mine")
    )  # another client: untouched
    kube_api.user_agent = "victim/1.0"
    await core.list_namespaced_config_map("default")  # a read: untouched
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", configmap("theirs"))
    assert err.value.status == 503
    assert rule.hits == 1


async def test_a_rule_with_a_probability_fails_that_share(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    core = client.CoreV1Api(kube_api)
    rule = kubesim.control.inject_error(500, method="GET", count=None, probability=0.5)
    failed = 0
    for _ in range(60):
        try:
            await core.list_namespaced_config_map("default")
        except ApiException:
            failed += 1
    assert failed == rule.hits
    assert 10 <= failed <= 50  # 60 draws at 1/2: outside this with a chance of about 1e-6
    with pytest.raises(ValueError, match="probability"):
        kubesim.control.inject_error(500, probability=0.0)


async def test_injected_latency_delays_matching_requests(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    kubesim.control.inject_latency(0.3, method="GET", path="/configmaps", count=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.CoreV1Api(kube_api).list_namespaced_config_map("default")
    assert loop.time() - started >= 0.3


async def test_requests_are_recorded_with_kubernetes_verbs(
    kube_api: ApiClient, kubesim: KubeSim
) -> None:
    core = client.CoreV1Api(kube_api)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    await core.create_namespaced_pod("default", pod)
    await core.read_namespaced_pod_status("p", "default")
    await core.list_pod_for_all_namespaces(label_selector="a=b")
    await core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    seen = [
        (r.verb, r.resource, r.namespace, r.name, r.subresource, r.status)
        for r in kubesim.control.recorded()
    ]
    assert seen == [
        ("create", "pods", "default", "", "", 201),
        ("get", "pods", "default", "p", "status", 200),
        ("list", "pods", "", "", "", 200),
        ("delete", "pods", "default", "p", "", 200),
    ]
    assert all("OpenAPI-Generator" in r.user_agent for r in kubesim.control.recorded())


async def test_warnings_are_recorded(kube_api: ApiClient, kubesim: KubeSim) -> None:
    batch = client.BatchV1Api(kube_api)
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
            }
        },
    }
    await batch.create_namespaced_job("default", job)
    assert kubesim.control.warnings() == []
    await batch.delete_namespaced_job("j", "default")
    assert len(kubesim.control.warnings()) == 1
    assert kubesim.control.recorded(verb="delete")[0].warnings == kubesim.control.warnings()


class TestFaultRate:
    @pytest.fixture
    def kubesim_settings(self) -> SimSettings:
        return SimSettings(fault_rate=1.0)

    async def test_every_write_fails_and_reads_still_work(
        self, kube_api: ApiClient, kubesim: KubeSim
    ) -> None:
        core = client.CoreV1Api(kube_api)
        with pytest.raises(ApiException) as err:
            await core.create_namespaced_config_map("default", configmap("a"))
        assert err.value.status == 500
        assert (await core.list_namespaced_config_map("default")).items == []
        assert kubesim.control.recorded(verb="create")[0].injected

    async def test_watches_are_cut_at_random(self, kubesim: KubeSim) -> None:
        url = kubesim.url + "/api/v1/namespaces/default/configmaps?watch=1"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            async with asyncio.timeout(
                15
            ):  # lifetimes are exponential with a 1 s mean at fault rate 1.0
                body = await resp.read()
        assert resp.status == 200
        assert body == b""


async def test_a_partition_drops_one_clients_connections_and_streams_until_healed(
    kubesim: KubeSim,
) -> None:
    url = kubesim.url + "/api/v1/namespaces/default/configmaps"
    victim = aiohttp.ClientSession(headers={"User-Agent": "victim/1.0"})
    bystander = aiohttp.ClientSession(headers={"User-Agent": "bystander/1.0"})
    async with victim, bystander:
        async with victim.get(url + "?watch=1") as stream:
            assert stream.status == 200
            await eventually(
                lambda: kubesim.control.open_watches() == 1, what="the watch to be open"
            )
            assert kubesim.control.partition(user_agent="victim") == 1, "its open watch is cut"
            with pytest.raises(aiohttp.ClientError):  # cut, not ended: no last chunk
                async with asyncio.timeout(10):
                    await stream.read()
        with pytest.raises(aiohttp.ClientError):
            async with victim.get(url) as refused:
                await refused.read()
        assert kubesim.control.recorded(verb="list", user_agent="victim")[-1].refused
        async with bystander.get(url) as answered:
            assert answered.status == 200, "other clients are served as usual"
        kubesim.control.heal()
        async with victim.get(url) as healed:
            assert healed.status == 200
    assert not kubesim.control.recorded(user_agent="bystander")[-1].refused


async def test_a_partition_with_a_status_answers_one_clients_requests_with_it_until_healed(
    kubesim: KubeSim,
) -> None:
    url = kubesim.url + "/api/v1/namespaces/default/configmaps"
    victim = aiohttp.ClientSession(headers={"User-Agent": "victim/1.0"})
    bystander = aiohttp.ClientSession(headers={"User-Agent": "bystander/1.0"})
    async with victim, bystander:
        async with victim.get(url + "?watch=1") as stream:
            await eventually(
                lambda: kubesim.control.open_watches() == 1, what="the watch to be open"
            )
            assert kubesim.control.partition(user_agent="victim", status=503) == 1, (
                "its open watch is cut"
            )
            with pytest.raises(aiohttp.ClientError):
                async with asyncio.timeout(10):
                    await stream.read()
        for path in (url, url + "?watch=1", kubesim.url + "/version"):
            async with victim.get(path) as answered:
                assert answered.status == 503, path
                assert "Retry-After" not in answered.headers, "a gateway with nobody behind it"
        last = kubesim.control.recorded(user_agent="victim")[-1]
        assert (last.status, last.injected, last.refused) == (503, True, False)
        async with bystander.get(url) as served:
            assert served.status == 200, "other clients are served as usual"
        kubesim.control.heal()
        async with victim.get(url) as healed:
            assert healed.status == 200
    with pytest.raises(ValueError, match="status must be a 5xx"):
        kubesim.control.partition(user_agent="victim", status=404)
