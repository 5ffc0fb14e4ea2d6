"""The composition root: `KubeSim` wires the cluster, its controllers (`build_controllers`, the
timer or the process runtime's kubelet), test control and the HTTP server; nothing below imports it.

Used by the pytest fixtures (`kubesim.testing`), by `mpi-operator sim` (`kubesim.cli`), by the demo
and the benchmarks. One KubeSim is one simulated cluster on one 127.0.0.1 port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from kubesim import kubeconfig
from kubesim.clock import Clock, FakeClock
from kubesim.cluster import Cluster, EventType
from kubesim.control import Control
from kubesim.controllers import Controller, WatchingController
from kubesim.controllers.disruption import DisruptionController
from kubesim.controllers.gc import GarbageCollector
from kubesim.controllers.jobs import JobController
from kubesim.controllers.kubelet import Kubelet
from kubesim.controllers.namespaces import NamespaceController
from kubesim.controllers.nodelifecycle import NodeLifecycleController
from kubesim.controllers.podgc import PodGarbageCollector
from kubesim.controllers.podgroups import PodGroupController
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.tainteviction import TaintEvictionController
from kubesim.controllers.volumes import VolumeManager
from kubesim.registry import ResourceType
from kubesim.server import build_app
from kubesim.settings import SimSettings
from kubesim.workqueue import WorkQueue

log = logging.getLogger(__name__)


@dataclass
class Controllers:
    """What `build_controllers` made; tests reach the kubelet (`evict`, `kill`) and volumes through
    it."""

    all: list[Controller] = field(default_factory=list)
    routes: list[web.RouteDef] = field(default_factory=list)
    clock: Clock | None = None
    """`settings.clock` when one was given, else a real `Clock` at `settings.time_scale`."""
    kubelet: Kubelet | None = None
    volumes: VolumeManager | None = None
    jobs: JobController | None = None
    gc: GarbageCollector | None = None
    namespaces: NamespaceController | None = None
    scheduler: Scheduler | None = None
    disruption: DisruptionController | None = None
    node_lifecycle: NodeLifecycleController | None = None
    taint_eviction: TaintEvictionController | None = None
    podgroups: PodGroupController | None = None


def build_controllers(cluster: Cluster, settings: SimSettings) -> Controllers:
    clock = settings.clock if settings.clock is not None else Clock(settings.time_scale)
    if isinstance(clock, FakeClock) and settings.runtime == "process":
        raise ValueError(
            "the process runtime runs real programs in real time: it cannot take a FakeClock"
        )
    volumes = VolumeManager(cluster, settings, clock)
    kubelet: Kubelet
    if settings.runtime == "process":
        # lazy: optional-runtime. The process runtime (17 modules, dnslib) loads only for a
        # cluster that runs it: a tenth of kubesim's import time, paid by no timer-runtime cluster.
        from kubesim.procrt.kubelet import ProcessKubelet

        kubelet = ProcessKubelet(cluster, settings, clock, volumes)
    else:
        kubelet = Kubelet(cluster, settings, clock, volumes)
    jobs = JobController(cluster, settings, clock)
    gc = GarbageCollector(cluster, clock)
    namespaces = NamespaceController(cluster, clock)
    scheduler = Scheduler(cluster, settings, clock, kubelet.events)
    disruption = DisruptionController(cluster, clock)
    node_lifecycle = NodeLifecycleController(cluster, settings, clock)
    kubelet.power_listeners.append(node_lifecycle.kubelet_power)
    taint_eviction = TaintEvictionController(cluster, clock)
    podgroups = PodGroupController(cluster, clock)
    podgc = PodGarbageCollector(cluster, clock, settings.terminated_pod_gc_threshold)
    watching: list[WatchingController] = [
        scheduler,
        volumes,
        kubelet,
        jobs,
        gc,
        namespaces,
        disruption,
        node_lifecycle,
        taint_eviction,
        podgroups,
        podgc,
    ]

    def fan_out(
        event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        # One listener for all, called with the stored objects (read only).
        for controller in watching:
            try:
                controller.on_change(event, rt, obj, old)
            except Exception:
                log.exception("kubesim controller %r failed on %s", controller, event)

    cluster.add_listener(fan_out)
    return Controllers(
        all=list(watching),
        routes=[*volumes.routes(), *kubelet.routes(), _sync_stats_route(clock)],
        clock=clock,
        kubelet=kubelet,
        volumes=volumes,
        jobs=jobs,
        gc=gc,
        namespaces=namespaces,
        scheduler=scheduler,
        disruption=disruption,
        node_lifecycle=node_lifecycle,
        taint_eviction=taint_eviction,
        podgroups=podgroups,
    )


def sync_stats(clock: Clock) -> dict[str, dict[str, float]]:
    """Each controller's syncs and the CPU seconds they took, by controller name."""
    stats: dict[str, dict[str, float]] = {}
    for queue in clock.queues:
        if isinstance(queue, WorkQueue) and queue.stats.controller:
            one = stats.setdefault(queue.stats.controller, {"syncs": 0, "cpuSeconds": 0.0})
            one["syncs"] += queue.stats.syncs
            one["cpuSeconds"] += queue.stats.cpu_seconds
    return stats


def _sync_stats_route(clock: Clock) -> web.RouteDef:
    """`GET /kubesim/v1/controllers`: `sync_stats` for clients in another process (benchmarks)."""

    async def handle(_request: web.Request) -> web.Response:
        return web.json_response({"controllers": sync_stats(clock)})

    return web.get("/kubesim/v1/controllers", handle)


class KubeSim:
    """A simulated Kubernetes cluster served over HTTP.

    `run_controllers=False` serves only the apiserver semantics (no kubelet, Job controller, GC,
    namespace controller): what contract tests of the API layer itself want.
    """

    def __init__(
        self, settings: SimSettings | None = None, *, run_controllers: bool = True
    ) -> None:
        self.settings = settings or SimSettings()
        self.cluster = Cluster(self.settings)
        self.control = Control(
            self.cluster.store,
            fault_rate=self.settings.fault_rate,
            priority_and_fairness=self.settings.priority_and_fairness,
        )
        self.controllers = (
            build_controllers(self.cluster, self.settings) if run_controllers else Controllers()
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
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
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
            self._tasks.append(
                asyncio.create_task(controller.run(), name=f"kubesim-{controller.name}")
            )

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
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
