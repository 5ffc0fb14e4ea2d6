"""`kube.sdk.resolve_proxy_once`: the API server's proxy comes from the environment once, when the client is
made (aiohttp would look it up in a thread on every request), with the same answer aiohttp gives:
the proxy for the server's scheme, its credentials as a header, none for a NO_PROXY host. Nothing is
sent anywhere: these only read what the client was configured with."""

from __future__ import annotations

import base64

import pytest

from mpi_operator.kube.client import Kube
from mpi_operator.kube.sdk import ApiClient, Configuration

SERVER = "https://10.96.0.1:443"


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
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, "http://10.96.0.1:80", "http://127.0.0.1:3128", None),
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
        expected = "Basic " + base64.b64encode(authorization.encode()).decode() if authorization else None
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
