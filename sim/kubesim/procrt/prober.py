"""One probe attempt against a real container, as the kubelet's pkg/probe makes it.

Network attempts go through a `Transport`. In production that is a `NetnsTransport`: its sockets are
created inside the runtime's bridge namespace (netns.py), so an attempt reaches pod IPs and can
never reach the machine's own network. Exec attempts go through the container runtime's exec, per
container. The HTTP client is a small HTTP/1.1 one on those streams (Go's net/http as the kubelet
configures it: no keep-alive, no TLS verification, the kubelet's redirect rule, a 10 KiB body
limit).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, assert_never
from urllib.parse import quote, urljoin, urlsplit

from kubesim.downward import go_quote
from kubesim.procrt.netns import socket_in_netns
from kubesim.procrt.probes import (
    BrokenAction,
    ExecAction,
    GRPCAction,
    HTTPGetAction,
    Outcome,
    ProbeResult,
    ProbeSpec,
    TCPSocketAction,
)

USER_AGENT = "kube-probe/1.32"
MAX_BODY = 10 * 1024
"""The kubelet reads at most 10 KiB of an HTTP body (and of exec output); the status alone
decides."""
MAX_REDIRECTS = 10
EXEC_GRACE_SECONDS = 1.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Go's net/http does not send these from the header map (or we send our own: Connection: close).
_UNSENT = frozenset(
    {"Host", "User-Agent", "Connection", "Content-Length", "Transfer-Encoding", "Trailer"}
)
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class Transport(Protocol):
    """Where a probe's connections come from: the bridge namespace in production, loopback in
    tests."""

    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connected TCP stream; raises OSError as a connect would (socket.gaierror for unknown
        names)."""
        ...


ExecInContainer = Callable[[Sequence[str], float], Awaitable[tuple[int, bytes]]]
"""`(argv, timeout_seconds) -> (exit code, stdout + stderr)`, run in the container by its runtime.
When the command outlives the timeout it kills it and raises TimeoutError; when cancelled (the
prober stopped) it kills it too, so no probe command outlives its attempt."""


class NetnsTransport:
    """Connections from inside the network namespace at `ns_path` (the runtime's bridge namespace).

    Only IP literals: a name would be resolved with the machine's resolver, from the machine's
    network.
    """

    def __init__(self, ns_path: str) -> None:
        self.ns_path = ns_path

    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, f"lookup {host}: no such host") from None
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        # Made synchronously (a thread that lives for one setns + socket): nothing to leak if
        # cancelled.
        sock = socket_in_netns(self.ns_path, family)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (str(ip), port))
            return await asyncio.open_connection(sock=sock)
        except BaseException:
            sock.close()
            raise


async def run_probe(
    spec: ProbeSpec,
    *,
    pod_ip: str,
    network: Transport,
    exec_in: ExecInContainer | None = None,
    time_limit: float | None = None,
) -> ProbeResult:
    """One attempt of `spec`, never raising (but for cancellation). `time_limit` (real seconds)
    overrides `spec.timeout_seconds`."""
    limit = float(spec.timeout_seconds if time_limit is None else time_limit)
    action = spec.action
    if isinstance(action, TCPSocketAction):
        return await _tcp(action.host or pod_ip, action.port, network, limit)
    if isinstance(action, HTTPGetAction):
        return await _http(action, pod_ip, network, limit)
    if isinstance(action, ExecAction):
        if exec_in is None:
            return ProbeResult(Outcome.ERROR, "exec probes need the container runtime's exec")
        return await _exec(action.command, exec_in, limit)
    if isinstance(action, GRPCAction):
        return ProbeResult(
            Outcome.FAILURE,
            f"grpc probes are not supported by kubesim's process runtime (port {action.port})",
        )
    if isinstance(action, BrokenAction):
        return ProbeResult(Outcome.ERROR, action.error)
    assert_never(action)


async def _tcp(host: str, port: int, network: Transport, limit: float) -> ProbeResult:
    deadline = asyncio.timeout(limit)
    try:
        async with deadline:
            _, writer = await network.open_connection(host, port)
    except TimeoutError as exc:
        if deadline.expired():
            return ProbeResult(Outcome.FAILURE, f"dial tcp {_host_port(host, port)}: i/o timeout")
        return ProbeResult(Outcome.FAILURE, _dial_error(host, port, exc))
    except OSError as exc:
        return ProbeResult(Outcome.FAILURE, _dial_error(host, port, exc))
    writer.close()
    return ProbeResult(Outcome.SUCCESS)


async def _exec(command: tuple[str, ...], exec_in: ExecInContainer, limit: float) -> ProbeResult:
    try:
        # The runtime's exec enforces `limit` and kills the command itself; this later bound only
        # keeps a runtime that does not from stalling the probe loop.
        async with asyncio.timeout(limit + EXEC_GRACE_SECONDS):
            code, output = await exec_in(command, limit)
    except TimeoutError:
        return ProbeResult(Outcome.FAILURE, f"command {go_quote(' '.join(command))} timed out")
    except Exception as exc:  # the runtime could not exec at all (e.g. the container is gone)
        return ProbeResult(Outcome.ERROR, str(exc) or type(exc).__name__)
    text = output[:MAX_BODY].decode("utf-8", "replace")
    return ProbeResult(Outcome.SUCCESS if code == 0 else Outcome.FAILURE, text)


class _Done(Exception):
    """Ends an HTTP attempt early with its result."""

    def __init__(self, result: ProbeResult) -> None:
        super().__init__(result.output)
        self.result = result


@dataclass
class _Request:
    url: str
    headers: list[tuple[str, str]]
    host_header: str
    referer: str = ""
    reading_body: bool = False


async def _http(
    action: HTTPGetAction, pod_ip: str, network: Transport, limit: float
) -> ProbeResult:
    host = action.host or pod_ip
    path = urlsplit(action.path)
    target = quote(path.path, safe="/%:@!$&'()*+,;=~") + (f"?{path.query}" if path.query else "")
    url = (
        f"{action.scheme.lower() or 'http'}://{_host_port(host, action.port)}/{target.lstrip('/')}"
    )
    values: dict[str, list[str]] = {}
    for name, value in action.headers:  # http.Header.Add: canonical names, repeated names kept
        values.setdefault(_canonical(name), []).append(value)
    values.setdefault("User-Agent", [USER_AGENT])
    values.setdefault("Accept", ["*/*"])
    if values["Accept"][0] == "":  # the kubelet's way to send no Accept at all
        del values["Accept"]
    headers = [(name, v) for name, vs in values.items() for v in vs if name not in _UNSENT]
    if agent := values["User-Agent"][0]:
        headers.insert(0, ("User-Agent", agent))
    request = _Request(url, headers, values.get("Host", [""])[0])
    for name, value in [*headers, ("Host", request.host_header)]:
        if not name or not set(name) <= _TOKEN:
            return _get_failed(url, f"net/http: invalid header field name {go_quote(name)}")
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            return _get_failed(url, f"net/http: invalid header field value for {go_quote(name)}")
    deadline = asyncio.timeout(limit)
    try:
        async with deadline:
            return await _follow(request, network)
    except _Done as done:
        return done.result
    except TimeoutError:
        # Go's http.Client.Timeout covers the whole exchange; its message says which part ran out.
        if request.reading_body:
            return ProbeResult(Outcome.ERROR, f"context deadline exceeded ({_BODY_TIMEOUT})")
        return _get_failed(
            request.url,
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        )


_BODY_TIMEOUT = "Client.Timeout or context cancellation while reading body"
_BROKEN = "net/http: HTTP/1.x transport connection broken"


def _get_failed(url: str, error: str) -> ProbeResult:
    """A failed `client.Do` as the kubelet reports it: Go's url.Error text."""
    return ProbeResult(Outcome.FAILURE, f"Get {go_quote(url)}: {error}")


async def _follow(request: _Request, network: Transport) -> ProbeResult:
    """Go's client with the kubelet's redirect check: same-host redirects are followed (10 at most);
    the response to one elsewhere is the final response (a 3xx: a success with a warning)."""
    first_host = urlsplit(request.url).hostname
    requests = 0
    while True:
        status, headers, body = await _exchange(request, network)
        requests += 1
        location = _header(headers, "location")
        if status not in _REDIRECTS or not location:
            break
        target = urljoin(request.url, location)
        if urlsplit(target).hostname != first_host:
            break
        if requests >= MAX_REDIRECTS:
            return _get_failed(location, f"stopped after {MAX_REDIRECTS} redirects")
        if urlsplit(location).scheme:  # Go keeps a custom Host only through relative redirects
            request.host_header = ""
        https_to_http = request.url.startswith("https:") and target.startswith("http:")
        request.referer = "" if https_to_http else request.url
        request.url = target
    text = body.decode("utf-8", "replace")
    if 200 <= status < 300:
        return ProbeResult(Outcome.SUCCESS, text)
    if 300 <= status < 400:
        return ProbeResult(Outcome.WARNING, f"Probe terminated redirects, Response body: {text}")
    # The kubelet keeps response bodies out of failure messages (kubernetes issue 99425).
    return ProbeResult(Outcome.FAILURE, f"HTTP probe failed with statuscode: {status}")


async def _exchange(
    request: _Request, network: Transport
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request on its own connection (the kubelet's prober disables keep-alive)."""
    parts = urlsplit(request.url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    request.reading_body = False
    try:
        reader, writer = await network.open_connection(host, port)
    except OSError as exc:
        raise _Done(_get_failed(request.url, _dial_error(host, port, exc))) from exc
    try:
        try:
            if https:
                await writer.start_tls(
                    _insecure_tls(), server_hostname=None if _is_ip(host) else host
                )
            lines = [f"GET {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1"]
            lines.append(f"Host: {request.host_header or parts.netloc}")
            lines += [f"{name}: {value}" for name, value in request.headers]
            if request.referer:
                lines.append(f"Referer: {request.referer}")
            lines.append("Connection: close")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            status, headers = await _read_head(reader)
        except (OSError, asyncio.IncompleteReadError, _Malformed) as exc:
            raise _Done(_get_failed(request.url, _io_error(exc))) from exc
        request.reading_body = True
        try:
            body = await _read_body(reader, status, headers)
        except (OSError, asyncio.IncompleteReadError, _Malformed) as exc:
            # A body the kubelet could not read is a probe error, not a failure.
            raise _Done(ProbeResult(Outcome.ERROR, _io_error(exc))) from exc
        return status, headers, body
    finally:
        writer.close()


class _Malformed(Exception):
    pass


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]]]:
    while True:
        line = await _line(reader)
        proto, _, rest = line.partition(" ")
        code = rest[:3]
        if not proto.startswith("HTTP/") or len(code) != 3 or not code.isdigit():
            raise _Malformed(f"{_BROKEN}: malformed HTTP response {go_quote(line)}")
        headers: list[tuple[str, str]] = []
        while header := await _line(reader):
            name, colon, value = header.partition(":")
            if not colon:
                raise _Malformed(f"{_BROKEN}: malformed MIME header line: {header}")
            headers.append((name.strip().lower(), value.strip()))
        status = int(code)
        if not 100 <= status < 200 or status == 101:  # Go skips interim 1xx responses
            return status, headers


async def _line(reader: asyncio.StreamReader) -> str:
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError as exc:
        raise _Malformed(f"{_BROKEN}: header line too long") from exc
    return raw.decode("latin-1").rstrip("\r\n")


async def _read_body(
    reader: asyncio.StreamReader, status: int, headers: list[tuple[str, str]]
) -> bytes:
    if status in (204, 304) or status < 200:
        return b""
    if "chunked" in _header(headers, "transfer-encoding").lower():
        body = bytearray()
        while len(body) < MAX_BODY:
            size_line = await _line(reader)
            try:
                size = int(size_line.partition(";")[0].strip(), 16)
            except ValueError:
                raise _Malformed("malformed chunked encoding") from None
            if size == 0:
                break
            take = min(size, MAX_BODY - len(body))
            body += await reader.readexactly(take)
            if take == size:
                await reader.readexactly(2)
        return bytes(body)
    length = _header(headers, "content-length")
    if length:
        if not length.isdigit():
            raise _Malformed(f"bad Content-Length {go_quote(length)}")
        return await reader.readexactly(min(int(length), MAX_BODY))
    body = bytearray()
    while len(body) < MAX_BODY and (data := await reader.read(MAX_BODY - len(body))):
        body += data
    return bytes(body)


def _header(headers: list[tuple[str, str]], name: str) -> str:
    return next((value for key, value in headers if key == name), "")


def _canonical(name: str) -> str:
    """textproto.CanonicalMIMEHeaderKey: `x-custom-header` is sent as `X-Custom-Header`."""
    if not name or not set(name) <= _TOKEN:
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


@functools.cache
def _insecure_tls() -> ssl.SSLContext:
    # The kubelet's prober skips verification (InsecureSkipVerify): pods serve self-signed
    # certificates.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _host_port(host: str, port: int) -> str:
    """net.JoinHostPort."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _errno_text(exc: OSError) -> str:
    # Go's errno strings are glibc's with a lower-case first letter ("connection refused").
    text = os.strerror(exc.errno) if exc.errno else (str(exc) or type(exc).__name__)
    return text[:1].lower() + text[1:]


def _dial_error(host: str, port: int, exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"dial tcp: lookup {host}: no such host"
    return f"dial tcp {_host_port(host, port)}: connect: {_errno_text(exc)}"


def _io_error(exc: BaseException) -> str:
    if isinstance(exc, asyncio.IncompleteReadError):
        return "EOF" if not exc.partial and exc.expected is None else "unexpected EOF"
    if isinstance(exc, ssl.SSLError):
        return f"tls: {(exc.reason or str(exc)).lower().replace('_', ' ')}"
    if isinstance(exc, OSError):
        return f"read tcp: {_errno_text(exc)}"
    return str(exc)
