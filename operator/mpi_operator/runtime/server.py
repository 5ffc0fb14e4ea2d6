"""The health and metrics HTTP server (aiohttp) on `--metrics-address`:

* `/healthz`  200 while the process (its event loop) answers: the liveness probe;
* `/readyz`   200 once every informer cache has synced and, with leader election, once this process
              leads; otherwise 503 with the reasons, one per line: the readiness probe;
* `/metrics`  the process' own Prometheus registry (`runtime.metrics.Metrics`).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from mpi_operator.runtime.metrics import CONTENT_TYPE, Metrics

log = logging.getLogger(__name__)


@dataclass
class Readiness:
    """What /readyz reports; the manager flips the flags as it starts, leads and stops."""

    leader_election: bool = False
    caches_synced: bool = False
    leading: bool = False
    stopping: bool = False
    unsynced: Callable[[], list[str]] = list
    """Names of the informers that have not synced yet (asked at each probe, for the 503
    message)."""

    def reasons(self) -> list[str]:
        reasons: list[str] = []
        if self.stopping:
            reasons.append("shutting down")
        if not self.caches_synced:
            pending = self.unsynced()
            detail = f": {', '.join(pending)}" if pending else ""
            reasons.append(f"informer caches not synced{detail}")
        if self.leader_election and not self.leading:
            reasons.append("not the leader")
        return reasons

    @property
    def ready(self) -> bool:
        return not self.reasons()


def parse_address(address: str) -> tuple[str, int]:
    """`host:port`, `:port` (all interfaces) or `[v6]:port`; port 0 picks a free one."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--metrics-address must be HOST:PORT, got {address!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class HealthServer:
    def __init__(self, address: str, *, readiness: Readiness, metrics: Metrics) -> None:
        self.host, self.port = parse_address(address)
        self.readiness = readiness
        self.metrics = metrics
        self._runner: web.AppRunner | None = None

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.build_app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        # Binding the socket ourselves tells us the port the kernel picked for `:0`.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(sock.getsockname()[1])
        log.info("serving /healthz, /readyz and /metrics on %s", self.url)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        reasons = self.readiness.reasons()
        if reasons:
            return web.Response(status=503, text="".join(f"not ready: {r}\n" for r in reasons))
        return web.Response(text="ok\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})
