"""The few parts of kubernetes_asyncio the client uses, without importing the rest of it.

The package's `__init__` imports every generated API and model class and the dynamic client, which
`kube.client` never uses (see `mpi_operator.kube` in docs/architecture.md). So before the first
import, `kubernetes_asyncio`, its `client` and `client.models` are registered as *deferred*
packages: real modules with their `__path__`, so submodules import as usual, whose own `__init__`
runs on the first attribute they lack. Code that wants the whole SDK pays for it then. When
kubernetes_asyncio is already imported, nothing is deferred.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from typing import Any
from urllib.parse import urlencode, urlsplit
from urllib.request import proxy_bypass

import aiohttp
from aiohttp.helpers import proxies_from_env

from mpi_operator.kube import codec

_DEFERRED = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


class DeferredPackage(types.ModuleType):
    """A package whose `__init__` runs on the first missing attribute (see the module docstring)."""

    def __getattr__(self, name: str) -> Any:
        if self.__dict__.get("_sdk_loaded"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if importlib.util.find_spec(f"{self.__name__}.{name}") is not None:
            # `from package import submodule` asks for the attribute first: import just that one.
            return importlib.import_module(f"{self.__name__}.{name}")
        self.__dict__["_sdk_loaded"] = True
        spec = self.__spec__
        assert spec is not None
        assert spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, name)


def _defer(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:  # pragma: no cover - not installed
        raise ImportError(f"{name} is not an installed package")
    module = DeferredPackage(name)
    module.__spec__ = spec
    module.__path__ = list(spec.submodule_search_locations)
    module.__file__ = spec.origin
    module.__loader__ = spec.loader
    module.__package__ = name
    if "." not in name:
        # What the package's own __init__ sets before its imports, for submodules that read them
        # back.
        module.__version__ = importlib.metadata.version(name)  # type: ignore[attr-defined]
        module.__project__ = name  # type: ignore[attr-defined]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def _install() -> None:
    if "kubernetes_asyncio" in sys.modules:
        return
    for name in _DEFERRED:
        _defer(name)
    client = sys.modules["kubernetes_asyncio.client"]
    from kubernetes_asyncio.client.api_client import ApiClient
    from kubernetes_asyncio.client.configuration import Configuration

    # The config loaders import these two from the package: give them without running its __init__.
    client.ApiClient = ApiClient  # type: ignore[attr-defined]
    client.Configuration = Configuration  # type: ignore[attr-defined]


_install()

# Submodule imports: `from kubernetes_asyncio import config` would ask the package for an attribute
# it does not have yet, and so run its whole __init__.
import kubernetes_asyncio.config as kube_config  # noqa: E402
from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402

_PLAIN_PARAMS = frozenset(
    {
        "query_params",
        "header_params",
        "body",
        "auth_settings",
        "_preload_content",
        "_request_timeout",
    }
)


class PlainApiClient(ApiClient):
    """`ApiClient` for a client that sends only plain JSON: no model objects to serialize.

    `ApiClient.sanitize_for_serialization` walks every request body (and the headers and parameters)
    to turn model objects and datetimes into JSON; `kube.client` never passes either, so the walk
    only rebuilt each body once more before `json.dumps`. Here it passes them through.

    `call_api` for a raw answer (`_preload_content=False`, what `kube.client` asks for) goes
    straight to the aiohttp session, with the same headers, authentication (a token refresh hook
    still runs before each request), URL and proxy as kubernetes_asyncio's path, and the body
    encoded by `codec.dumps`: that path's copies, parameter tuples and regular expressions cost more
    CPU than the request itself. Any other call is kubernetes_asyncio's own.
    """

    def sanitize_for_serialization(self, obj: Any) -> Any:
        return obj

    def call_api(self, resource_path: str, method: str, *args: Any, **kwargs: Any) -> Any:
        timeout = kwargs.get("_request_timeout")
        if (
            args
            or kwargs.get("_preload_content", True)
            or not kwargs.keys() <= _PLAIN_PARAMS
            or not (timeout is None or isinstance(timeout, aiohttp.ClientTimeout))
        ):
            return super().call_api(resource_path, method, *args, **kwargs)
        return self._plain_call(resource_path, method, **kwargs)

    async def _plain_call(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: list[tuple[str, str]] | None = None,
        header_params: dict[str, str] | None = None,
        body: Any = None,
        auth_settings: list[str] | None = None,
        _preload_content: bool = False,
        _request_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        headers = dict(header_params or {})
        headers.update(self.default_headers)
        if self.cookie:
            headers["Cookie"] = self.cookie
        query = list(query_params or ())
        await self.update_params_for_auth(headers, query, auth_settings or [])
        headers.setdefault("Content-Type", "application/json")
        url = f"{self.configuration.host}{resource_path}"
        if query:
            url += "?" + urlencode(query)
        rest = self.rest_client
        session: aiohttp.ClientSession = rest.pool_manager
        return await session.request(
            method.upper(),
            url,
            headers=headers,
            data=None if body is None else codec.dumps(body),
            timeout=_request_timeout or aiohttp.ClientTimeout(),
            proxy=rest.proxy or None,
            proxy_headers=rest.proxy_headers or None,
            server_hostname=rest.server_hostname or None,
        )


READ_BUFSIZE = 2**21
"""kubernetes_asyncio's read buffer: a watch event may carry an object of up to etcd's 1.5 MiB."""


def resolve_proxy_once(api_client: ApiClient) -> None:
    """Looks up the API server's proxy in the environment once, instead of on every request.

    kubernetes_asyncio's session trusts the environment, so aiohttp looks up
    `HTTPS_PROXY`/`NO_PROXY` and `~/.netrc` for each request, each in a thread
    (docs/architecture.md#decisions-and-why). The proxy cannot change while the process runs, so it
    is resolved here for the API server's URL (with its credentials as a `Proxy-Authorization`
    header) and the session is replaced by one that does not look again, on the same connector. A
    `.netrc` entry for the API server is not read, as client-go does not read one either.
    """
    rest = api_client.rest_client
    session = rest.pool_manager
    if not session.trust_env:
        return
    server = urlsplit(api_client.configuration.host or "")
    # What aiohttp's get_env_proxy_for_url decides for each request, decided once.
    bypass = server.hostname is not None and bool(proxy_bypass(server.hostname))
    found = None if bypass else proxies_from_env().get(server.scheme)
    if not rest.proxy and found is not None:
        rest.proxy = str(found.proxy)
        if found.proxy_auth is not None:
            auth = found.proxy_auth.encode()
            rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth}
    connector = session.connector
    session.detach()
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=READ_BUFSIZE
    )


__all__ = [
    "ApiClient",
    "Configuration",
    "DeferredPackage",
    "PlainApiClient",
    "kube_config",
    "resolve_proxy_once",
]
