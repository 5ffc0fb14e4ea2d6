"""`kube.sdk.resolve_proxy_once`: the API server's proxy comes from the environment once, when the
client is made (aiohttp would look it up in a thread on every request), with the same answer aiohttp
gives: the proxy for the server's scheme, its credentials as a header, none for a NO_PROXY host.
Nothing is sent anywhere: these only read what the client was configured with. And
`PlainApiClient`'s own request path puts on the wire what kubernetes_asyncio's would."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from mpi_operator.kube.client import Kube
from mpi_operator.kube.sdk import ApiClient, Configuration, PlainApiClient

SERVER = "https://10.96.0.1:443"
ECHOED_HEADERS = ("Accept", "Content-Type", "Authorization", "User-Agent", "Cookie")


def client(host: str = SERVER, proxy: str | None = None) -> ApiClient:
    configuration = Configuration()
    configuration.host = host
    configuration.proxy = proxy
    return ApiClient(configuration)


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.parametrize(
    ("env", "host", "proxy", "authorization"),
    [
        ({}, SERVER, None, None),
        ({"HTTPS_PROXY": "http://127.0.0.1:3128"}, SERVER, "http://127.0.0.1:3128", None),
        ({"HTTPS_PROXY": "http://u:p@127.0.0.1:3128"}, SERVER, "http://127.0.0.1:3128", "u:p"),
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, SERVER, None, None),  # the server speaks https
        (
            {"HTTP_PROXY": "http://127.0.0.1:3128"},
            "http://10.96.0.1:80",
            "http://127.0.0.1:3128",
            None,
        ),
        ({"HTTPS_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "10.96.0.1"}, SERVER, None, None),
    ],
)
async def test_the_proxy_is_resolved_once_as_aiohttp_would(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    host: str,
    proxy: str | None,
    authorization: str | None,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    kube = Kube(client(host))
    try:
        rest = kube.api_client.rest_client
        assert rest.pool_manager.trust_env is False
        assert rest.proxy == proxy
        header = (rest.proxy_headers or {}).get("Proxy-Authorization")
        expected = (
            "Basic " + base64.b64encode(authorization.encode()).decode() if authorization else None
        )
        assert header == expected
    finally:
        await kube.close()


async def test_a_configured_proxy_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    kube = Kube(client(proxy="http://127.0.0.1:8888"))
    try:
        assert kube.api_client.rest_client.proxy == "http://127.0.0.1:8888"
    finally:
        await kube.close()


async def test_a_raw_call_sends_what_kubernetes_asyncio_sends() -> None:
    """`PlainApiClient.call_api` for a raw answer skips kubernetes_asyncio's request path, not what
    it puts on the wire: method, path and query, default and given headers, the bearer token
    (refreshed by the config's hook before each request) and the JSON body, compared on a local HTTP
    server that echoes what it got."""
    seen: list[dict[str, Any]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(
            {
                "method": request.method,
                "path": request.path_qs,
                "headers": {k: request.headers.get(k) for k in ECHOED_HEADERS},
                "body": json.loads(await request.read()) if request.can_read_body else None,
            }
        )
        return web.json_response({"kind": "Status"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    tokens = iter(f"token-{i}" for i in range(100))

    def refresh(configuration: Configuration) -> None:
        configuration.api_key["BearerToken"] = next(tokens)

    def configured(cls: type[ApiClient]) -> ApiClient:
        configuration = Configuration()
        configuration.host = f"http://127.0.0.1:{port}"
        configuration.api_key = {"BearerToken": "unset"}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.refresh_api_key_hook = refresh
        api_client = cls(configuration)
        api_client.user_agent = "mpi-operator/test"
        return api_client

    calls: list[tuple[str, str, list[tuple[str, str]], dict[str, Any] | None, str]] = [
        (
            "POST",
            "/api/v1/namespaces/ns/configmaps",
            [("fieldManager", "m")],
            {"data": {"k": "caf\u00e9"}},
            "application/json",
        ),
        (
            "PATCH",
            "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/j/status",
            [],
            {"status": {}},
            "application/merge-patch+json",
        ),
        (
            "GET",
            "/api/v1/pods",
            [("labelSelector", "a=b,c in (d)"), ("watch", "true")],
            None,
            "application/json",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods/p",
            [],
            {"kind": "DeleteOptions", "apiVersion": "v1"},
            "application/json",
        ),
    ]
    stock, plain = configured(ApiClient), configured(PlainApiClient)
    try:
        for api_client in (stock, plain):
            for method, path, query, body, content_type in calls:
                response = await api_client.call_api(
                    path,
                    method,
                    query_params=list(query),
                    header_params={"Accept": "application/json", "Content-Type": content_type},
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=aiohttp.ClientTimeout(total=10),
                )
                assert response.status == 200
                response.release()
    finally:
        await stock.close()
        await plain.close()
        await runner.cleanup()
    by_stock, by_plain = seen[: len(calls)], seen[len(calls) :]
    for request in by_stock + by_plain:
        assert request["headers"]["Authorization"].startswith("Bearer token-")
        request["headers"]["Authorization"] = "Bearer token-N"  # each request refreshed its own
    assert by_plain == by_stock
    assert len({request["headers"]["User-Agent"] for request in seen}) == 1
