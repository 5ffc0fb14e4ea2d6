"""The HTTP face of kubesim: aiohttp routes mapping Kubernetes REST requests onto `Cluster` verbs.

Owns URL parsing into apiserver request info (verb, group, version, resource, namespace, name,
subresource), query-parameter parsing (booleans like Go's `strconv.ParseBool`), content negotiation
(JSON, Table, aggregated discovery), watch streaming as chunked JSON lines, `Warning` headers, and
the middleware that records requests and applies injected faults and latency from `kubesim.control`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import yaml
from aiohttp import web

from kubesim import discovery, encoding, errors, openapi, podlog, protobuf, table
from kubesim.cluster import Cluster, DeleteOptions, WriteOptions, Written
from kubesim.control import Control, RecordedRequest
from kubesim.query import TRUE, flag, parse_bool
from kubesim.registry import ResourceType

log = logging.getLogger(__name__)

JSON = "application/json"
CLUSTER_KEY = web.AppKey("kubesim_cluster", Cluster)
CONTROL_KEY = web.AppKey("kubesim_control", Control)
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


SUCCESS_201 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success",
    "code": 201,
}


@dataclass(frozen=True)
class RequestInfo:
    """What an API request addresses, as the apiserver's RequestInfoFactory works it out."""

    verb: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    is_resource: bool = False


INFO_KEY = web.RequestKey("kubesim_info", RequestInfo)


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestInfo()
    watch_prefix = bool(rest) and rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return RequestInfo(group=group, version=version)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
    if method in ("GET", "HEAD"):
        verb = "get" if name else "list"
        # As the RequestInfoFactory: a flag it cannot parse means "list", whose handler refuses it.
        if watch_prefix or query.get("watch") in TRUE:
            verb = "watch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    return RequestInfo(
        verb, group, version, resource, namespace, name, subresource, is_resource=True
    )


def json_response(
    body: Any, status: int = 200, *, warnings: Iterable[str] = (), content_type: str = JSON
) -> web.Response:
    return encoded_response(
        encoding.dumps(body), status, warnings=warnings, content_type=content_type
    )


def encoded_response(
    data: bytes, status: int = 200, *, warnings: Iterable[str] = (), content_type: str = JSON
) -> web.Response:
    response = web.Response(body=data, status=status, headers={"Content-Type": content_type})
    for text in warnings:
        response.headers.add("Warning", '299 - "{}"'.format(text.replace('"', '\\"')))
    return response


def status_response(err: errors.StatusError) -> web.Response:
    response = json_response(err.status(), err.code)
    if err.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(err.retry_after_seconds)
    return response


NOT_FOUND = errors.StatusError(404, "NotFound", "the server could not find the requested resource")


class ApiHandler:
    """Resource endpoints (`/api/v1/...`, `/apis/{g}/{v}/...`) and discovery, for one cluster."""

    def __init__(self, cluster: Cluster, control: Control) -> None:
        self.cluster = cluster
        self.control = control
        self.encoder = encoding.ObjectEncoder()

    # --- discovery, version, OpenAPI --------------------------------------------------------------
    async def version(self, request: web.Request) -> web.Response:
        return json_response(discovery.VERSION_INFO)

    async def api_root(self, request: web.Request) -> web.Response:
        aggregated = discovery.wants_aggregated(request.headers.get("Accept", ""))
        if aggregated:
            version = (
                "apidiscovery.k8s.io/v2beta1"
                if "v2beta1" in aggregated
                else "apidiscovery.k8s.io/v2"
            )
            body = discovery.aggregated(self.cluster.registry, core=True, api_version=version)
            return json_response(body, content_type=aggregated)
        return json_response(discovery.legacy_api())

    async def apis_root(self, request: web.Request) -> web.Response:
        aggregated = discovery.wants_aggregated(request.headers.get("Accept", ""))
        if aggregated:
            version = (
                "apidiscovery.k8s.io/v2beta1"
                if "v2beta1" in aggregated
                else "apidiscovery.k8s.io/v2"
            )
            body = discovery.aggregated(self.cluster.registry, core=False, api_version=version)
            return json_response(body, content_type=aggregated)
        return json_response(discovery.legacy_groups(self.cluster.registry))

    async def openapi_root(self, request: web.Request) -> web.Response:
        return json_response(openapi.root(self.cluster.registry))

    async def openapi_group_version(self, request: web.Request) -> web.Response:
        parts = request.match_info["tail"].strip("/").split("/")
        doc = None
        if len(parts) == 2 and parts[0] == "api":
            doc = openapi.group_version(self.cluster.registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = openapi.group_version(self.cluster.registry, parts[1], parts[2])
        if doc is None:
            raise NOT_FOUND
        return json_response(doc)

    async def not_served(self, request: web.Request) -> web.Response:
        raise NOT_FOUND

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok", content_type="text/plain")

    # --- resources -------------------------------------------------------------------------------
    async def resource(self, request: web.Request) -> web.StreamResponse:
        info = request[INFO_KEY]
        query = request.query
        if not info.is_resource:
            return await self._group_discovery(request, info)
        rt = self.cluster.registry.by_plural(info.group, info.version, info.resource)
        if rt is None:
            raise NOT_FOUND
        ns = info.namespace if rt.namespaced else None
        if not rt.namespaced and info.namespace and info.resource != "namespaces":
            raise NOT_FOUND  # a cluster-scoped resource under /namespaces/{ns}/
        warnings = self._deprecation(rt)
        verb, sub = info.verb, info.subresource or None
        if sub is not None and verb in ("list", "watch", "deletecollection"):
            raise NOT_FOUND
        if verb in ("update", "patch") and not info.name:
            raise errors.method_not_allowed(
                f"the server does not allow this method on {info.resource}"
            )
        if verb == "watch":
            return await self._watch(request, rt, ns)
        if verb == "list":
            flag(request.query, "watch")  # only refuses what Go would not parse: this is a list
            listed = self.cluster.list(
                rt,
                ns,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
                limit=int(query["limit"]) if query.get("limit", "").isdigit() else None,
                continue_token=query.get("continue") or None,
                copy_objects=False,
            )
            how = table.negotiate(request.headers.get("Accept", ""))
            if how == "object":
                return encoded_response(self.encoder.object_list(listed), warnings=warnings)
            include = table.include_object(query.get("includeObject"))
            return json_response(
                table.render_list(rt, listed, how, self.cluster.now(), include), warnings=warnings
            )
        if (
            rt.namespaced
            and not ns
            and verb in ("create", "get", "update", "patch", "delete", "deletecollection")
        ):
            raise NOT_FOUND
        if verb == "get":
            if sub == "scale":
                return json_response(self.cluster.get_scale(rt, ns, info.name), warnings=warnings)
            if sub == "log" and rt.kind == "Pod" and not rt.group:
                return await podlog.serve(request, self.cluster, rt, ns or "", info.name)
            if sub not in (None, "status"):
                raise NOT_FOUND
            obj = self.cluster.get(rt, ns, info.name, copy_object=False)
            how = table.negotiate(request.headers.get("Accept", ""))
            if how == "object":
                return encoded_response(self.encoder.object(obj), warnings=warnings)
            include = table.include_object(query.get("includeObject"))
            rendered = table.render(rt, obj, how, self.cluster.now(), include)
            return json_response(rendered, warnings=warnings)
        if verb == "create":
            body = await self._json_body(request)
            if sub == "eviction" and "eviction" in rt.subresources:
                dry_run = self._write_options(request).dry_run
                answer, code = self.cluster.evict(rt, ns, info.name, body, dry_run=dry_run)
                return json_response(answer, code, warnings=warnings)
            if sub == "binding" and "binding" in rt.subresources:
                node = str((body.get("target") or {}).get("name") or "")
                self.cluster.bind(rt, ns, info.name, node, opts=self._write_options(request))
                return json_response(SUCCESS_201, 201, warnings=warnings)
            if sub is not None or info.name:
                raise errors.method_not_allowed(
                    f"the server does not allow this method on {info.resource}"
                )
            written = self.cluster.create(
                rt, ns, body, opts=self._write_options(request), owned=True
            )
            return self._written(written, warnings, 201)
        if verb == "update":
            body = await self._json_body(request)
            written = self.cluster.update(
                rt,
                ns,
                info.name,
                body,
                subresource=sub,
                opts=self._write_options(request),
                owned=True,
            )
            return self._written(written, warnings, 200)
        if verb == "patch":
            raw = await request.read()
            content_type = request.headers.get("Content-Type", "")
            written = self.cluster.patch(
                rt,
                ns,
                info.name,
                raw,
                content_type,
                subresource=sub,
                opts=self._write_options(request),
            )
            return self._written(written, warnings, 201 if written.created else 200)
        if verb == "delete":
            if sub is not None:
                raise NOT_FOUND
            options = await self._delete_options(request)
            written = self.cluster.delete_object(rt, ns, info.name, options=options)
            return encoded_response(
                self.encoder.object(written.stored),
                200 if written.deleted else 202,
                warnings=[*warnings, *written.warnings],
            )
        if verb == "deletecollection":
            options = await self._delete_options(request)
            listed = self.cluster.delete_collection(
                rt,
                ns,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
                options=options,
            )
            return json_response(listed, warnings=warnings)
        raise errors.method_not_allowed(
            "the server does not allow this method on the requested resource"
        )

    async def _group_discovery(self, request: web.Request, info: RequestInfo) -> web.Response:
        if request.method != "GET":
            raise errors.method_not_allowed(
                "the server does not allow this method on the requested resource"
            )
        if not info.version:
            raise NOT_FOUND
        doc = discovery.resource_list(self.cluster.registry, info.group, info.version)
        if doc is None:
            raise NOT_FOUND
        return json_response(doc)

    async def api_group(self, request: web.Request) -> web.Response:
        doc = discovery.legacy_group(self.cluster.registry, request.match_info["group"])
        if doc is None:
            raise NOT_FOUND
        return json_response(doc)

    def _deprecation(self, rt: ResourceType) -> list[str]:
        if not rt.deprecated:
            return []
        return [rt.deprecation_warning or f"{rt.api_version} {rt.kind} is deprecated"]

    def _written(self, written: Written, warnings: list[str], status: int) -> web.Response:
        return encoded_response(
            self.encoder.object(written.stored), status, warnings=[*warnings, *written.warnings]
        )

    def _write_options(self, request: web.Request) -> WriteOptions:
        query = request.query
        dry_run = query.getall("dryRun", [])
        if any(v != "All" for v in dry_run):
            raise errors.bad_request(f"Invalid dry run value: {dry_run}")
        validation = query.get("fieldValidation", "Warn") or "Warn"
        if validation not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request(
                f"fieldValidation must be one of Ignore, Warn, Strict; got {validation!r}"
            )
        return WriteOptions(
            dry_run=bool(dry_run),
            field_validation=cast(Literal["Ignore", "Warn", "Strict"], validation),
            field_manager=query.get("fieldManager", ""),
            user_agent=request.headers.get("User-Agent", ""),
        )

    async def _json_body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        media = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower()
        if media == protobuf.MEDIA_TYPE:
            # kubectl's typed generators (`create namespace|configmap|secret|...`) send protobuf.
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise errors.unsupported_media_type(
                    f"the body of the request could not be read: {exc}"
                ) from exc
        if media not in (JSON, "", "application/yaml", "application/x-yaml", "*/*"):
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                f"{JSON}, "
                f"application/yaml, {protobuf.MEDIA_TYPE} (some kinds)"
            )
        try:
            body = (
                yaml.safe_load(raw.decode())
                if media in ("application/yaml", "application/x-yaml")
                else json.loads(raw or b"null")
            )
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from exc
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        return body

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        raw = await request.read()
        body: dict[str, Any] = {}
        if raw.strip():
            try:
                loaded = json.loads(raw)
            except ValueError as exc:
                raise errors.bad_request(f"error decoding DeleteOptions: {exc}") from exc
            body = loaded if isinstance(loaded, dict) else {}
        query = request.query
        policy = query.get("propagationPolicy") or body.get("propagationPolicy")
        orphan = query.get("orphanDependents") or body.get("orphanDependents")
        if policy is None and orphan is not None:
            policy = (
                "Orphan"
                if (orphan is True or parse_bool(str(orphan), "orphanDependents"))
                else "Background"
            )
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise errors.bad_request(f"unsupported propagationPolicy {policy!r}")
        grace = query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        dry_run = query.getall("dryRun", []) or body.get("dryRun") or []
        return DeleteOptions(
            propagation_policy=cast(Literal["Background", "Foreground", "Orphan"] | None, policy),
            grace_period_seconds=int(grace) if grace is not None else None,
            preconditions=body.get("preconditions"),
            dry_run="All" in dry_run,
        )

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None
    ) -> web.StreamResponse:
        query = request.query
        include = table.include_object(query.get("includeObject"))
        batches = self.cluster.watch_batches(
            rt,
            ns,
            resource_version=query.get("resourceVersion", ""),
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            allow_bookmarks=parse_bool(query.get("allowWatchBookmarks"), "allowWatchBookmarks"),
            send_initial_events=parse_bool(query.get("sendInitialEvents"), "sendInitialEvents"),
            copy_objects=False,
        )
        limits = (
            [float(query["timeoutSeconds"])] if query.get("timeoutSeconds", "").isdigit() else []
        )
        if (lifetime := self.control.watch_lifetime()) is not None:
            limits.append(lifetime)
        how = table.negotiate(request.headers.get("Accept", ""))
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        severed = False
        untrack: Callable[[], None] | None = None
        try:
            async with asyncio.timeout(min(limits) if limits else None) as scope:

                def sever() -> None:
                    # A partition (`Control.partition`) cuts the stream now, as a lost connection
                    # would.
                    nonlocal severed
                    severed = True
                    if not scope.expired():
                        scope.reschedule(asyncio.get_running_loop().time())

                untrack = self.control.track_stream(request.headers.get("User-Agent", ""), sever)
                async for batch in batches:
                    lines = []
                    for event in batch:
                        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
                            lines.append(
                                encoding.dumps({"type": event.type, "object": event.object})
                            )
                        elif how == "object":
                            lines.append(self.encoder.event(event.type, event.object))
                        else:
                            now = self.cluster.now()
                            obj = table.render(rt, event.object, how, now, include)
                            lines.append(encoding.dumps({"type": event.type, "object": obj}))
                    # A burst of changes goes out in one write (one chunk, one send), not one per
                    # event.
                    await response.write(b"\n".join(lines) + b"\n")
        except TimeoutError:
            pass
        except ConnectionError:
            return response  # the client went away
        finally:
            if untrack is not None:
                untrack()
            await batches.aclose()  # type: ignore[attr-defined]
        if severed:
            _drop_connection(request)
            return response
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response


def _drop_connection(request: web.Request) -> None:
    """Closes the client's connection without an answer (or without the rest of one): an outage."""
    if request.transport is not None:
        request.transport.abort()


def _record(request: web.Request, info: RequestInfo) -> RecordedRequest:
    return RecordedRequest(
        method=request.method,
        path=request.path,
        query=request.query_string,
        verb=info.verb,
        group=info.group,
        version=info.version,
        resource=info.resource,
        namespace=info.namespace,
        name=info.name,
        subresource=info.subresource,
        user_agent=request.headers.get("User-Agent", ""),
        content_type=request.headers.get("Content-Type", ""),
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


def _apf_uid(kind: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kubesim/{kind}/global-default"))


_APF_HEADERS: Final = {
    # What a real API server answers for a request classified into its catch-all flow schema:
    # clients only test for the headers' presence (client-go, Flux), the UIDs are the objects'
    # (stable here).
    "X-Kubernetes-PF-FlowSchema-UID": _apf_uid("flowschemas"),
    "X-Kubernetes-PF-PriorityLevel-UID": _apf_uid("prioritylevelconfigurations"),
}


def build_middleware(control: Control) -> Middleware:
    @web.middleware
    async def kube_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        info = request_info(request.method, request.path, request.query)
        request[INFO_KEY] = info
        record = _record(request, info)
        control.record(record)
        response: web.StreamResponse
        if control.refuses(record.user_agent):
            if (status := control.outage_status(record.user_agent)) is not None:
                record.injected = True
                record.status = status
                return status_response(errors.from_code(status, "kubesim: no API server"))
            record.refused = True
            _drop_connection(request)
            return web.Response(status=503)  # never sent: the connection is gone
        try:
            if delay := control.latency_for(request.method, request.path):
                await asyncio.sleep(delay)
            if (
                fault := control.fault_for(request.method, request.path, record.user_agent)
            ) is not None:
                record.injected = True
                raise fault
            response = await handler(request)
        except errors.StatusError as err:
            response = status_response(err)
        except web.HTTPNotFound:
            response = status_response(NOT_FOUND)
        except web.HTTPMethodNotAllowed:
            response = status_response(
                errors.method_not_allowed("the server does not allow this method")
            )
        except ValueError as exc:  # a malformed query parameter (limit, gracePeriodSeconds, ...)
            response = status_response(
                errors.bad_request(f"kubesim could not parse the request: {exc}")
            )
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as exc:
            # A kubesim bug: answer like an apiserver would (500 Status), and say where in the log.
            log.exception("kubesim: internal error on %s %s", request.method, request.path)
            response = status_response(errors.internal(f"kubesim internal error: {exc!r}"))
        record.status = response.status
        # Recorded as the text a client shows, not as the escaped quoted-string on the wire.
        record.warnings = [
            w.removeprefix('299 - "').removesuffix('"').replace('\\"', '"')
            for w in response.headers.getall("Warning", [])
        ]
        return response

    return kube_middleware


def build_app(
    cluster: Cluster, control: Control, *, extra_routes: Iterable[web.RouteDef] = ()
) -> web.Application:
    middleware: Any = build_middleware(
        control
    )  # aiohttp's Middleware protocol is narrower than a decorated fn
    app = web.Application(middlewares=[middleware], client_max_size=64 * 1024 * 1024)

    async def priority_and_fairness(_request: web.Request, response: web.StreamResponse) -> None:
        # A signal, not the middleware: watch streams send their headers before the handler returns.
        if control.priority_and_fairness:
            response.headers.update(_APF_HEADERS)

    app.on_response_prepare.append(priority_and_fairness)
    app[CLUSTER_KEY] = cluster
    app[CONTROL_KEY] = control
    api = ApiHandler(cluster, control)
    app.add_routes(list(extra_routes))
    app.router.add_get("/version", api.version)
    app.router.add_get("/healthz", api.healthz)
    app.router.add_get("/livez", api.healthz)
    app.router.add_get("/readyz", api.healthz)
    app.router.add_get("/api", api.api_root)
    app.router.add_get("/apis", api.apis_root)
    app.router.add_get("/openapi/v3", api.openapi_root)
    app.router.add_get("/openapi/v3/{tail:.*}", api.openapi_group_version)
    app.router.add_get("/openapi/v2", api.not_served)
    app.router.add_get("/apis/{group}", api.api_group)
    app.router.add_route("*", "/api/{tail:.+}", api.resource)
    app.router.add_route("*", "/apis/{group}/{tail:.+}", api.resource)

    async def close_watches(_app: web.Application) -> None:
        cluster.store.close_watchers()

    app.on_shutdown.append(close_watches)
    return app
