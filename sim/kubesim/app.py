"""The composition root: `KubeSim` wires the cluster, its controllers, test control and the HTTP server.

Used by the pytest fixtures (`kubesim.testing`), by `mpi-operator sim` (`kubesim.cli`), by the demo
and the benchmarks. One KubeSim is one simulated cluster on one 127.0.0.1 port.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from types import TracebackType

from aiohttp import web

from kubesim import controllers as sim_controllers
from kubesim import kubeconfig
from kubesim.cluster import Cluster
from kubesim.control import Control
from kubesim.server import build_app
from kubesim.settings import SimSettings


class KubeSim:
    """A simulated Kubernetes cluster served over HTTP.

    `run_controllers=False` serves only the apiserver semantics (no kubelet, Job controller, GC,
    namespace controller): what contract tests of the API layer itself want.
    """

    def __init__(self, settings: SimSettings | None = None, *, run_controllers: bool = True) -> None:
        self.settings = settings or SimSettings()
        self.cluster = Cluster(self.settings)
        self.control = Control(
            self.cluster.store,
            fault_rate=self.settings.fault_rate,
            priority_and_fairness=self.settings.priority_and_fairness,
        )
        self.controllers = (
            sim_controllers.build_controllers(self.cluster, self.settings)
            if run_controllers
            else sim_controllers.Controllers()
        )
        self.kubeconfig_path: Path | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._port = 0
        self._host = "127.0.0.1"

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("KubeSim is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    async def start(self, port: int = 0, *, host: str = "127.0.0.1") -> None:
        if self._runner is not None:
            raise RuntimeError("KubeSim is already started")
        app = build_app(self.cluster, self.control, extra_routes=self.controllers.routes)
        # handler_cancellation: a client that hangs up ends its watch handler at once.
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            site = web.SockSite(runner, sock)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._host = host
        self._port = int(sock.getsockname()[1])
        for controller in self.controllers.all:
            self._tasks.append(asyncio.create_task(controller.run(), name=f"kubesim-{controller.name}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self.cluster.store.close_watchers()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._port = 0

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Writes a kubeconfig for this server (context `kubesim`, namespace `default`)."""
        self.kubeconfig_path = kubeconfig.write_kubeconfig(path, self.url)
        return self.kubeconfig_path

    async def __aenter__(self) -> KubeSim:
        if self._runner is None:
            await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
