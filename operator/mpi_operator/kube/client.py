"""`Kube`: the only door to the API server. Plain JSON dicts in and out, typed errors, limiter,
retries.

kubernetes_asyncio's `ApiClient` does config, auth, TLS, proxies and the session; answers come back
raw (`_preload_content=False`) and are decoded by `codec`, so no generated model is ever built.
Every request (retries and watch reconnects too) takes a token from the QPS/burst bucket, unless
`limit_until_apf` and the server has shown API Priority and Fairness (docs/architecture.md, "No
client-side rate limit"), then runs under `RetryPolicy`; inside `with kube.urgent():` tokens are
taken on credit. `Warning` headers go to the log and `on_warning`. Patches always carry an explicit
Content-Type: kubernetes_asyncio's default for custom objects is json-patch.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypedDict, Unpack

import aiohttp

from mpi_operator import __version__
from mpi_operator.flowcontrol import TokenBucket
from mpi_operator.kube import codec, errors
from mpi_operator.kube.resources import Resource
from mpi_operator.kube.retry import RetryPolicy
from mpi_operator.kube.sdk import (
    ApiClient,
    Configuration,
    PlainApiClient,
    kube_config,
    resolve_proxy_once,
)
from mpi_operator.objects import KubeObject, WatchEvent, metadata, resource_version

PatchType = Literal["merge", "json", "strategic", "apply"]
PatchBody = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""An object (merge, strategic, apply) or a list of operations (json-patch)."""
PropagationPolicy = Literal["Background", "Foreground", "Orphan"]

CONTENT_TYPES: Mapping[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
DEFAULT_USER_AGENT = f"mpi-operator/{__version__}"
LIST_PAGE_SIZE = 500

log = logging.getLogger(__name__)
_WARNING_TEXT = re.compile(r'^\s*\d{3}\s+\S+\s+"(?P<text>(?:[^"\\]|\\.)*)"')


def parse_warning(header: str) -> str:
    """The text of a `Warning: 299 - "text"` header (RFC 7234 warn-value), or the header itself."""
    match = _WARNING_TEXT.match(header)
    return match.group("text").replace('\\"', '"') if match else header


_APF_HEADERS = ("X-Kubernetes-PF-FlowSchema-UID", "X-Kubernetes-PF-PriorityLevel-UID")

_URGENT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mpi_operator_urgent_requests", default=False
)


class ClientOptions(TypedDict, total=False):
    """What `Kube.from_kubeconfig` passes on to the constructor (whose defaults apply to what is
    left out)."""

    qps: float
    burst: int
    limiter: TokenBucket | None
    limit_until_apf: bool
    retry: RetryPolicy | None
    field_manager: str | None
    user_agent: str
    request_timeout: float
    on_warning: Callable[[str], None] | None


class StatusPatchOptions(TypedDict, total=False):
    """`Kube.patch`'s options that apply to the status subresource."""

    namespace: str | None
    patch_type: PatchType


class Kube:
    """Async Kubernetes client over an `ApiClient`; see the module docstring."""

    @staticmethod
    @contextlib.contextmanager
    def urgent() -> Iterator[None]:
        """The requests this task makes inside skip the client-side queue (not its rate: they
        borrow).

        A context variable, so only the current task's requests (and tasks it starts) are
        affected."""
        token = _URGENT.set(True)
        try:
            yield
        finally:
            _URGENT.reset(token)

    def __init__(
        self,
        api_client: ApiClient,
        *,
        qps: float = 5.0,
        burst: int = 10,
        limiter: TokenBucket | None = None,  # None: a bucket from qps/burst
        limit_until_apf: bool = False,
        retry: RetryPolicy | None = None,  # None: RetryPolicy()
        field_manager: str | None = "mpi-operator",
        user_agent: str = DEFAULT_USER_AGENT,
        request_timeout: float = 30.0,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.api_client = api_client
        api_client.user_agent = user_agent
        resolve_proxy_once(api_client)
        self.limiter = limiter or TokenBucket(qps, burst)
        self.limit_until_apf = limit_until_apf
        self.server_has_apf = False
        """Seen an answer with API Priority and Fairness headers (a server never loses APF at
        runtime)."""
        self.retry = retry or RetryPolicy()
        self.field_manager = field_manager
        self.request_timeout = request_timeout
        self.on_warning = on_warning

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        server: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> Kube:
        """Config from `path`, else $KUBECONFIG, else in-cluster, else ~/.kube/config
        (controller-runtime's order); `options` are the constructor's.

        `server` (upstream's `--master`) replaces the config's API server URL; with no kubeconfig it
        is the whole config, a plain connection without credentials, as client-go's
        BuildConfigFromFlags (for `kubectl proxy`)."""
        configuration = Configuration()
        path = path or os.environ.get("KUBECONFIG") or None
        if path is None and server:
            configuration.host = server.rstrip("/")
            return cls(PlainApiClient(configuration), **options)
        if path is None:
            try:
                kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except kube_config.ConfigException:
                await kube_config.load_kube_config(
                    client_configuration=configuration, context=context
                )
        else:
            await kube_config.load_kube_config(
                config_file=path, client_configuration=configuration, context=context
            )
        if server:
            configuration.host = server.rstrip("/")
        return cls(PlainApiClient(configuration), **options)

    async def close(self) -> None:
        await self.api_client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- reads ---------------------------------------------------------------------------------
    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> KubeObject:
        return await self._call("GET", resource.path(namespace, name))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
        transform: Callable[[KubeObject], KubeObject] | None = None,
    ) -> tuple[list[KubeObject], str]:
        """All matching objects (following `continue` pages) and the list's resourceVersion.

        Items get `kind`/`apiVersion` filled in (the server omits them inside lists). If a continue
        token expires mid-way (410), the list restarts unpaginated, as client-go's pager does.
        `transform` (an informer's, `cache.transforms`) runs on each item as its page arrives, and
        the page is dropped before the next is asked for: at most one page of raw objects is alive
        at a time, not the whole list (a whole relist decoded at once is most of a restart's peak
        RSS).
        """
        query = _selectors(label_selector, field_selector)
        items: list[KubeObject] = []
        token: str | None = None
        limit: int | None = page_size or None
        while True:
            page_query = list(query)
            if limit:
                page_query.append(("limit", str(limit)))
            if token:
                page_query.append(("continue", token))
            try:
                body = await self._call("GET", resource.path(namespace), query=page_query)
            except errors.Gone:
                if not token:
                    raise
                items, token, limit = [], None, None
                continue
            page = body.pop("items", None) or ()
            token = metadata(body).get("continue") or None
            version = resource_version(body)
            del body
            for item in page:
                item.setdefault("kind", resource.kind)
                item.setdefault("apiVersion", resource.api_version)
                items.append(item if transform is None else transform(item))
            del page
            if not token:
                return items, version

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Raw watch events until the server ends the stream (e.g. after `timeout_seconds`).

        Opening errors raise typed errors (410 as `Gone`); a cut stream raises `TransientError`.
        `ERROR` events are yielded as they come: interpreting them is the reflector's job.
        Not retried here: the reflector decides between resuming and relisting.
        """
        query = _selectors(label_selector, field_selector)
        query.append(("watch", "true"))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        # The server ends the stream after timeoutSeconds; the client bound only catches a dead
        # peer.
        total = timeout_seconds + 30.0 if timeout_seconds is not None else None
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.request_timeout)
        await self._throttle()
        response = await self._send("GET", resource.path(namespace), query=query, timeout=timeout)
        try:
            if response.status >= 400:
                raise await self._error(response)
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise errors.TransientError(
                        f"watch stream of {resource.plural} broke: {exc!r}"
                    ) from exc
                if not line:
                    return
                if line.strip():
                    yield codec.loads(line)
        finally:
            response.close()

    async def ping(self, *, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (one request's own bound)
        """`GET /version` once: no retries, and ahead of the client-side queue (it borrows a token,
        as `urgent()` does). Raises `TransientError` when no answer comes within `timeout` seconds,
        a typed `ApiError` for an error answer. The cheapest sign that the API server is there
        (recovery probe)."""
        with self.urgent():
            await self._throttle()
        response = await self._send(
            "GET", "/version", query=(), timeout=aiohttp.ClientTimeout(total=timeout)
        )
        try:
            if response.status >= 400:
                raise await self._error(response)
        finally:
            response.release()

    # --- writes --------------------------------------------------------------------------------
    async def create(
        self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None
    ) -> KubeObject:
        """POST; returns the created object. 409 AlreadyExists raises `AlreadyExists`."""
        namespace = namespace or _meta(obj).get("namespace")
        return await self._call(
            "POST", resource.path(namespace), body=obj, query=self._write_query()
        )

    async def replace(
        self, resource: Resource, obj: Mapping[str, Any], *, subresource: str | None = None
    ) -> KubeObject:
        """PUT the whole object (optimistic lock on its resourceVersion: stale -> `Conflict`)."""
        meta = _meta(obj)
        path = resource.path(meta.get("namespace"), meta["name"], subresource)
        return await self._call("PUT", path, body=obj, query=self._write_query())

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: PatchBody,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        force: bool = False,
    ) -> KubeObject:
        """PATCH with an explicit Content-Type; `apply` is server-side apply under our field
        manager."""
        if patch_type == "strategic" and resource.is_custom:
            raise ValueError(
                f"{resource.kind} is a custom resource: strategic merge patch is not served"
            )
        if patch_type == "json" and isinstance(patch, Mapping):
            raise TypeError("a json-patch body is a list of operations")
        query = self._write_query()
        if patch_type == "apply":
            if not self.field_manager:
                raise ValueError("server-side apply needs a field manager")
            if force:
                query.append(("force", "true"))
        return await self._call(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            query=query,
            content_type=CONTENT_TYPES[patch_type],
        )

    async def patch_status(
        self, resource: Resource, name: str, patch: PatchBody, **options: Unpack[StatusPatchOptions]
    ) -> KubeObject:
        """`patch` on the status subresource."""
        return await self.patch(resource, name, patch, subresource="status", **options)

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> KubeObject:
        """DELETE with DeleteOptions; `uid` / `resource_version` become preconditions (409 if they
        no longer hold). Returns the server's answer: the object (still terminating) or a Status."""
        options: KubeObject = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        return await self._call("DELETE", resource.path(namespace, name), body=options)

    def lister_watcher(
        self, resource: Resource, *, allow_bookmarks: bool = True
    ) -> ResourceListerWatcher:
        """This client bound to one resource, as the reflector's `ListerWatcher`."""
        return ResourceListerWatcher(self, resource, allow_bookmarks=allow_bookmarks)

    # --- plumbing ------------------------------------------------------------------------------
    async def _throttle(self) -> None:
        if self.limit_until_apf and self.server_has_apf:
            return
        await self.limiter.wait(urgent=_URGENT.get())

    def _write_query(self) -> builtins.list[tuple[str, str]]:
        return [("fieldManager", self.field_manager)] if self.field_manager else []

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> KubeObject:
        async def attempt() -> KubeObject:
            await self._throttle()
            timeout = aiohttp.ClientTimeout(total=self.request_timeout)
            response = await self._send(
                method, path, query=query, body=body, content_type=content_type, timeout=timeout
            )
            try:
                if response.status >= 400:
                    raise await self._error(response)
                try:
                    data = await response.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise errors.TransientError(f"{method} {path}: {exc!r}") from exc
            finally:
                response.release()
            decoded = codec.loads(data) if data else {}
            if not isinstance(decoded, dict):
                raise ValueError(
                    f"{method} {path}: expected a JSON object, got {type(decoded).__name__}"
                )
            return decoded

        return await self.retry.call(attempt)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's per-request timeout, not ours)
        body: Any = None,
        content_type: str = "application/json",
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.TransientError(f"{method} {path}: {exc!r}") from exc
        if not self.server_has_apf and any(h in response.headers for h in _APF_HEADERS):
            self.server_has_apf = True
            if self.limit_until_apf and not self.limiter.unlimited:
                log.info(
                    "the API server has API Priority and Fairness: no client-side rate limit from "
                    "now on "
                    "(--qps sets one)"
                )
        for warning in response.headers.getall("Warning", ()):
            text = parse_warning(warning)
            log.warning("API warning for %s %s: %s", method, path, text)
            if self.on_warning is not None:
                self.on_warning(text)
        return response

    @staticmethod
    async def _error(response: aiohttp.ClientResponse) -> errors.KubeError:
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError):
            data = b""
        return errors.from_status(
            response.status, data, response.headers, http_reason=response.reason or ""
        )


class ResourceListerWatcher:
    """A `Kube` bound to one resource: client-go's `NewListWatchFromClient`.

    It satisfies `cache.reflector.ListerWatcher` structurally, so `cache` never imports this module
    or the HTTP stack. Watches ask for bookmarks unless told not to.
    """

    def __init__(self, kube: Kube, resource: Resource, *, allow_bookmarks: bool = True) -> None:
        self.kube = kube
        self.resource = resource
        self.allow_bookmarks = allow_bookmarks

    async def list(
        self,
        namespace: str | None,
        label_selector: str | None,
        *,
        transform: Callable[[KubeObject], KubeObject] | None = None,
    ) -> tuple[list[KubeObject], str]:
        return await self.kube.list(
            self.resource, namespace, label_selector=label_selector, transform=transform
        )

    def watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        return self.kube.watch(
            self.resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=self.allow_bookmarks,
        )


def _selectors(label_selector: str | None, field_selector: str | None) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError("object has no metadata")
    return meta
