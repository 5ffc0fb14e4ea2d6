"""Real probe attempts (kubesim.procrt.prober) on loopback: TCP, HTTP(S) against real servers, exec
of real processes, the prober end to end; and NetnsTransport against a real network namespace (root
only)."""

from __future__ import annotations

import asyncio
import datetime
import errno
import os
import shutil
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubesim.procrt.prober import MAX_BODY, NetnsTransport, run_probe
from kubesim.procrt.probes import (
    ExecAction,
    HTTPGetAction,
    Outcome,
    ProbeEvent,
    ProbeResult,
    ProbeSpec,
    TCPSocketAction,
)
from kubesim.procrt.probeworker import ContainerProber

LOOPBACK = "127.0.0.1"


class Loopback:
    """The tests' transport: connections from this namespace, to 127.0.0.1 only."""

    def __init__(self) -> None:
        self.dialed: list[tuple[str, int]] = []

    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.dialed.append((host, port))
        if host != LOOPBACK:
            raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))
        return await asyncio.open_connection(host, port)


class Unanswered:
    """A peer that never answers the SYN."""

    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def attempt(spec: ProbeSpec, network: Any = None, **kwargs: Any) -> ProbeResult:
    return await run_probe(spec, pod_ip=LOOPBACK, network=network or Loopback(), **kwargs)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound (so no one else takes it) but not listening: connecting is refused."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        yield sock.getsockname()[1]


# TCP


async def test_tcp_succeeds_against_a_listener() -> None:
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(on_connect, LOOPBACK, 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        assert await attempt(ProbeSpec(TCPSocketAction(port))) == ProbeResult(Outcome.SUCCESS)
        async with asyncio.timeout(5):
            await accepted.wait()


async def test_tcp_fails_with_the_kubelets_refused_message(closed_port: int) -> None:
    result = await attempt(ProbeSpec(TCPSocketAction(closed_port)))
    assert result == ProbeResult(
        Outcome.FAILURE, f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
    )


async def test_tcp_times_out_as_an_io_timeout() -> None:
    result = await run_probe(
        ProbeSpec(TCPSocketAction(22)), pod_ip="10.244.0.5", network=Unanswered()
    )
    assert result == ProbeResult(Outcome.FAILURE, "dial tcp 10.244.0.5:22: i/o timeout")


async def test_tcp_to_another_host_uses_that_host() -> None:
    network = Loopback()
    result = await attempt(ProbeSpec(TCPSocketAction(22, host="10.244.0.9")), network)
    assert network.dialed == [("10.244.0.9", 22)]
    assert result == ProbeResult(
        Outcome.FAILURE, "dial tcp 10.244.0.9:22: connect: network is unreachable"
    )


# HTTP


@dataclass
class Server:
    port: int
    requests: list[web.Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


def _app(server: Server) -> web.Application:
    async def record(request: web.Request) -> None:
        server.requests.append(request)

    async def ok(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(text="fine")

    async def status(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(
            status=int(request.match_info["code"]), text="body that stays out of messages"
        )

    async def redirect(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(status=302, headers={"Location": request.query["to"]}, text="moved")

    async def chain(request: web.Request) -> web.StreamResponse:
        await record(request)
        left = int(request.match_info["n"])
        if left == 0:
            return web.Response(text="end of chain")
        return web.Response(status=307, headers={"Location": f"/chain/{left - 1}"})

    async def slow(request: web.Request) -> web.StreamResponse:
        await record(request)
        await server.release.wait()
        return web.Response(text="too late")

    async def slow_body(request: web.Request) -> web.StreamResponse:
        await record(request)
        response = web.StreamResponse()
        response.content_length = 100
        await response.prepare(request)
        await response.write(b"the start")
        await server.release.wait()
        return response

    async def big(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(body=b"x" * (1 << 20))

    async def chunked(request: web.Request) -> web.StreamResponse:
        await record(request)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b"chunk one, ", b"chunk two"):
            await response.write(part)
        await response.write_eof()
        return response

    app = web.Application()
    app.add_routes(
        [
            web.get("/ok", ok),
            web.get("/status/{code}", status),
            web.get("/redirect", redirect),
            web.get("/chain/{n}", chain),
            web.get("/slow", slow),
            web.get("/slow-body", slow_body),
            web.get("/big", big),
            web.get("/chunked", chunked),
        ]
    )
    return app


async def _serve(ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(port=0)
    runner = web.AppRunner(_app(server), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=ssl_context)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


@pytest.fixture
async def http_server() -> AsyncIterator[Server]:
    async for server in _serve():
        yield server


def http(
    path: str, *, port: int, headers: Sequence[tuple[str, str]] = (), scheme: str = "HTTP"
) -> ProbeSpec:
    return ProbeSpec(HTTPGetAction(port, path, "", scheme, tuple(headers)))


async def test_http_200_succeeds_with_the_kubelets_headers(http_server: Server) -> None:
    result = await attempt(http("/ok", port=http_server.port))
    assert result == ProbeResult(Outcome.SUCCESS, "fine")
    [request] = http_server.requests
    assert request.version == (1, 1)
    assert request.headers["Host"] == f"127.0.0.1:{http_server.port}"
    assert request.headers["User-Agent"] == "kube-probe/1.32"
    assert request.headers["Accept"] == "*/*"
    assert request.headers["Connection"] == "close"


async def test_http_custom_headers_are_sent_and_can_replace_the_defaults(
    http_server: Server,
) -> None:
    headers = [
        ("x-probe-token", "t1"),
        ("X-Probe-Token", "t2"),
        ("Host", "pod.example"),
        ("user-agent", "mine"),
    ]
    headers.append(("Accept", ""))
    assert (
        await attempt(http("/ok", port=http_server.port, headers=headers))
    ).outcome is Outcome.SUCCESS
    [request] = http_server.requests
    assert request.headers.getall("X-Probe-Token") == ["t1", "t2"]
    assert (b"X-Probe-Token", b"t1") in request.raw_headers  # sent with Go's canonical name
    assert request.headers["Host"] == "pod.example"
    assert request.headers.getall("User-Agent") == ["mine"]
    assert "Accept" not in request.headers


async def test_http_error_statuses_fail_without_the_body(http_server: Server) -> None:
    result = await attempt(http("/status/500", port=http_server.port))
    assert result == ProbeResult(Outcome.FAILURE, "HTTP probe failed with statuscode: 500")
    assert (await attempt(http("/status/404", port=http_server.port))).outcome is Outcome.FAILURE
    assert (await attempt(http("/status/204", port=http_server.port))).outcome is Outcome.SUCCESS


async def test_http_redirects_to_the_same_host_are_followed(http_server: Server) -> None:
    relative = await attempt(http("/redirect?to=/ok", port=http_server.port))
    absolute = await attempt(http(f"/redirect?to={http_server.base}/ok", port=http_server.port))
    assert relative == absolute == ProbeResult(Outcome.SUCCESS, "fine")
    paths = [r.path for r in http_server.requests]
    assert paths == ["/redirect", "/ok", "/redirect", "/ok"]
    assert http_server.requests[1].headers["Referer"] == f"{http_server.base}/redirect?to=/ok"


async def test_a_custom_host_header_survives_only_relative_redirects(http_server: Server) -> None:
    headers = [("Host", "pod.example")]
    await attempt(http("/redirect?to=/ok", port=http_server.port, headers=headers))
    await attempt(
        http(f"/redirect?to={http_server.base}/ok", port=http_server.port, headers=headers)
    )
    hosts = [r.headers["Host"] for r in http_server.requests]
    assert hosts == ["pod.example", "pod.example", "pod.example", f"127.0.0.1:{http_server.port}"]


async def test_http_a_redirect_to_another_host_is_a_success_with_a_warning(
    http_server: Server,
) -> None:
    network = Loopback()
    result = await attempt(
        http("/redirect?to=http://10.244.0.9:8080/elsewhere", port=http_server.port), network
    )
    assert result == ProbeResult(
        Outcome.WARNING, "Probe terminated redirects, Response body: moved"
    )
    assert result.ok
    assert network.dialed == [(LOOPBACK, http_server.port)]  # never followed


async def test_http_follows_nine_redirects_and_fails_on_the_tenth(http_server: Server) -> None:
    assert await attempt(http("/chain/9", port=http_server.port)) == ProbeResult(
        Outcome.SUCCESS, "end of chain"
    )
    result = await attempt(http("/chain/10", port=http_server.port))
    assert result == ProbeResult(Outcome.FAILURE, 'Get "/chain/0": stopped after 10 redirects')


async def test_http_timeout_is_the_clients_deadline_message(http_server: Server) -> None:
    result = await attempt(http("/slow", port=http_server.port))
    assert result == ProbeResult(
        Outcome.FAILURE,
        f'Get "{http_server.base}/slow": '
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
    )


async def test_http_a_body_cut_by_the_deadline_is_a_probe_error(http_server: Server) -> None:
    result = await attempt(http("/slow-body", port=http_server.port))
    assert result == ProbeResult(
        Outcome.ERROR,
        "context deadline exceeded (Client.Timeout or context cancellation while reading body)",
    )


async def test_http_reads_at_most_10_kib_of_a_body(http_server: Server) -> None:
    result = await attempt(http("/big", port=http_server.port))
    assert result == ProbeResult(Outcome.SUCCESS, "x" * MAX_BODY)
    chunked = await attempt(http("/chunked", port=http_server.port))
    assert chunked == ProbeResult(Outcome.SUCCESS, "chunk one, chunk two")


async def test_http_refused_names_the_url(closed_port: int) -> None:
    result = await attempt(http("/healthz", port=closed_port))
    assert result == ProbeResult(
        Outcome.FAILURE,
        f'Get "http://127.0.0.1:{closed_port}/healthz": '
        f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused",
    )


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"", "EOF"),
        (
            b"garbage\r\n\r\n",
            'net/http: HTTP/1.x transport connection broken: malformed HTTP response "garbage"',
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", None),
    ],
)
async def test_http_broken_responses(reply: bytes, message: str | None) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, LOOPBACK, 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        result = await attempt(http("/", port=port))
    if message is None:  # a body cut short: the kubelet's probe error, not a failure
        assert result == ProbeResult(Outcome.ERROR, "unexpected EOF")
    else:
        assert result == ProbeResult(Outcome.FAILURE, f'Get "http://127.0.0.1:{port}/": {message}')


async def test_http_headers_the_kubelet_refuses_are_failures() -> None:
    result = await attempt(http("/", port=80, headers=[("X-Bad", "a\r\nInjected: yes")]))
    assert result == ProbeResult(
        Outcome.FAILURE,
        'Get "http://127.0.0.1:80/": net/http: invalid header field value for "X-Bad"',
    )


# HTTPS


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pod.cluster.local")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
async def https_server(self_signed: tuple[Path, Path]) -> AsyncIterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*self_signed)
    async for server in _serve(context):
        yield server


async def test_https_skips_verification_of_a_self_signed_certificate(https_server: Server) -> None:
    result = await attempt(http("/ok", port=https_server.port, scheme="HTTPS"))
    assert result == ProbeResult(Outcome.SUCCESS, "fine")
    assert https_server.requests[0].secure
    failing = await attempt(http("/status/503", port=https_server.port, scheme="HTTPS"))
    assert failing == ProbeResult(Outcome.FAILURE, "HTTP probe failed with statuscode: 503")


async def test_https_against_plain_http_fails_in_tls(http_server: Server) -> None:
    result = await attempt(http("/ok", port=http_server.port, scheme="HTTPS"))
    assert result.outcome is Outcome.FAILURE
    assert result.output.startswith(f'Get "https://127.0.0.1:{http_server.port}/ok": tls: ')


# exec


@dataclass
class LocalExec:
    """The container runtime's exec, played by local subprocesses."""

    processes: list[asyncio.subprocess.Process] = field(default_factory=list)

    async def __call__(self, argv: Sequence[str], seconds: float) -> tuple[int, bytes]:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        self.processes.append(proc)
        try:
            async with asyncio.timeout(seconds):
                output, _ = await proc.communicate()
        except BaseException:  # timed out or cancelled: the command must not outlive the probe
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        return proc.returncode, output


async def test_exec_exit_codes_decide_and_output_is_the_message() -> None:
    run = LocalExec()
    ok = await attempt(ProbeSpec(ExecAction(("sh", "-c", "echo healthy"))), exec_in=run)
    assert ok == ProbeResult(Outcome.SUCCESS, "healthy\n")
    bad = await attempt(
        ProbeSpec(ExecAction(("sh", "-c", "echo 'no pid file' >&2; exit 3"))), exec_in=run
    )
    assert bad == ProbeResult(Outcome.FAILURE, "no pid file\n")
    big = await attempt(
        ProbeSpec(ExecAction((sys.executable, "-c", "print('y' * 50000)"))), exec_in=run
    )
    assert big == ProbeResult(Outcome.SUCCESS, "y" * MAX_BODY)


async def test_exec_timeout_fails_and_kills_the_command() -> None:
    run = LocalExec()
    result = await attempt(ProbeSpec(ExecAction(("sleep", "30"))), exec_in=run)
    assert result == ProbeResult(Outcome.FAILURE, 'command "sleep 30" timed out')
    [proc] = run.processes
    assert proc.returncode == -9


async def test_exec_through_a_runtime_that_ignores_the_timeout_is_still_bounded() -> None:
    cancelled = asyncio.Event()

    async def stubborn(argv: Sequence[str], seconds: float) -> tuple[int, bytes]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 0, b""

    result = await attempt(ProbeSpec(ExecAction(("hang",))), exec_in=stubborn)
    assert (result, cancelled.is_set()) == (
        ProbeResult(Outcome.FAILURE, 'command "hang" timed out'),
        True,
    )


async def test_exec_that_cannot_start_is_a_probe_error() -> None:
    result = await attempt(ProbeSpec(ExecAction(("/nonexistent/probe",))), exec_in=LocalExec())
    assert result.outcome is Outcome.ERROR
    assert "/nonexistent/probe" in result.output
    no_runtime = await attempt(ProbeSpec(ExecAction(("true",))))
    assert no_runtime.outcome is Outcome.ERROR


# The prober end to end, on a fast real clock (a simulated second is a real millisecond).


async def test_the_prober_reports_readiness_and_liveness_from_real_attempts(
    http_server: Server,
) -> None:
    ready, killed = asyncio.Event(), asyncio.Event()
    events: list[ProbeEvent] = []
    readiness: list[bool] = []
    container = {
        "name": "web",
        "ports": [{"name": "http", "containerPort": http_server.port}],
        "startupProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1},
        "readinessProbe": {"httpGet": {"port": "http", "path": "/ok"}, "periodSeconds": 1},
        "livenessProbe": {"httpGet": {"port": "http", "path": "/status/500"}, "periodSeconds": 1},
    }

    def on_ready(value: bool) -> None:
        readiness.append(value)
        ready.set()

    def on_liveness_failure(message: str) -> None:
        assert message == "Container web failed liveness probe, will be restarted"
        killed.set()

    prober = ContainerProber.start(
        container,
        pod_ip=LOOPBACK,
        network=Loopback(),
        sleep=lambda s: asyncio.sleep(s / 1000),
        on_ready=on_ready,
        on_liveness_failure=on_liveness_failure,
        on_event=events.append,
    )
    try:
        async with asyncio.timeout(10):
            await ready.wait()
            await killed.wait()
    finally:
        prober.stop()
        await prober.wait_stopped()
    assert readiness == [True]
    assert (
        events
        == [
            ProbeEvent("Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500")
        ]
        * 3
    )


def test_the_prober_needs_exactly_one_network() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ContainerProber.start({"name": "c"}, pod_ip=LOOPBACK, sleep=asyncio.sleep)


# NetnsTransport in a real network namespace

NETNS_SERVER = """
import socket, sys
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(16)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    try:
        if conn.recv(65536):
            conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 9\\r\\n\\r\\nin netns\\n")
    except OSError:
        pass
    finally:
        conn.close()
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="creating and entering a network namespace needs root"
)
@pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="needs unshare (util-linux) and ip",
)
async def test_netns_transport_probes_inside_the_namespace(closed_port: int) -> None:
    # The namespace's server listens on the port that is refused on the machine's own loopback.
    holder = await asyncio.create_subprocess_exec(
        "unshare",
        "--net",
        "sh",
        "-c",
        'ip link set lo up && exec "$0" -c "$1" "$2"',
        sys.executable,
        NETNS_SERVER,
        str(closed_port),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        async with asyncio.timeout(10):
            assert await holder.stdout.readline() == b"listening\n"
        ns_path = f"/proc/{holder.pid}/ns/net"
        assert os.readlink(ns_path) != os.readlink("/proc/self/ns/net")
        inside = NetnsTransport(ns_path)

        tcp = ProbeSpec(TCPSocketAction(closed_port))
        assert await attempt(tcp, inside) == ProbeResult(Outcome.SUCCESS)
        get = ProbeSpec(HTTPGetAction(closed_port, "/healthz"))
        assert await attempt(get, inside) == ProbeResult(Outcome.SUCCESS, "in netns\n")
        # The same address from the machine's own namespace: nothing there.
        outside = await attempt(tcp, Loopback())
        assert outside.output == f"dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
        # Names would be resolved from the machine's network: never.
        named = await attempt(ProbeSpec(TCPSocketAction(closed_port, host="localhost")), inside)
        assert named == ProbeResult(Outcome.FAILURE, "dial tcp: lookup localhost: no such host")
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.wait()
