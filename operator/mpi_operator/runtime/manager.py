"""The manager: the only wiring point of `mpi-operator run` (controller-runtime's Manager).

Start-up: API clients (leader election gets its own client and limiter, so reconciles never starve
renewals) and the health server; a preflight LIST per watch (a missing CRD or a 401/403 is fatal);
the informers of `handlers.watches`, namespace-scoped by `settings.namespaces`; every cache synced;
with leader election the Lease; then the reconciler from the factory (`ManagerDeps`) and its loops.
Shutdown (SIGTERM/SIGINT or `request_stop()`): /readyz turns 503, informers stop, in-flight
reconciles get `shutdown_grace` seconds (a second signal cuts it short), and only then is the Lease
released. Losing the Lease is fatal (`LeadershipLost`, exit 1) as upstream: restarting is simpler
and safer than resetting every cache and in-memory state of a deposed leader. All time is the
injected clock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from mpi_operator.api import constants
from mpi_operator.cache.informer import Informer
from mpi_operator.cache.ratelimit import default_controller_rate_limiter
from mpi_operator.cache.recovery import RecoveryProber
from mpi_operator.cache.workqueue import WorkQueue
from mpi_operator.flowcontrol import Clock, MonotonicClock, TokenBucket
from mpi_operator.kube import errors, resources
from mpi_operator.kube.client import DEFAULT_USER_AGENT, Kube
from mpi_operator.kube.events import EventRecorder
from mpi_operator.kube.resources import Resource
from mpi_operator.kube.retry import NO_RETRY, RetryPolicy
from mpi_operator.runtime import handlers, leaderelection, loops, server
from mpi_operator.runtime.metrics import QUEUE_NAME, Metrics
from mpi_operator.runtime.types import FatalError, ManagerDeps, ReconcilerFactory, Stores, utc_now
from mpi_operator.settings import Settings, client_limit

log = logging.getLogger(__name__)
T = TypeVar("T")

PREFLIGHT_NAME = "metadata.name=mpi-operator-preflight"
"""A field selector that matches nothing: the preflight LIST costs one empty answer."""
LEADER_ELECTION_COMPONENT = "mpi-operator"
CLOSE_TIMEOUT = 5.0
"""Seconds each client or recorder gets to flush and close at exit."""


class CRDNotInstalled(FatalError):
    pass


class PreflightFailed(FatalError):
    pass


class Manager:
    def __init__(
        self,
        settings: Settings,
        reconciler_factory: ReconcilerFactory,
        *,
        selectors: handlers.WatchSelectors | None = None,  # None: handlers.WatchSelectors()
        identity: str | None = None,  # None: `<hostname>_<uuid>`
        shutdown_grace: float = 20.0,
        sync_warning_seconds: float = 30.0,
        clock: Clock | None = None,  # None for the real clock
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.reconciler_factory = reconciler_factory
        self.selectors = selectors or handlers.WatchSelectors()
        self.identity = identity or leaderelection.new_identity()
        self.shutdown_grace = shutdown_grace
        self.sync_warning_seconds = sync_warning_seconds
        self.clock: Clock = clock or MonotonicClock()
        self.now = now
        self.metrics = Metrics()
        self.readiness = server.Readiness(
            leader_election=settings.leader_elect, unsynced=self._unsynced
        )
        self.server = server.HealthServer(
            settings.metrics_address, readiness=self.readiness, metrics=self.metrics
        )
        self.queue: WorkQueue[str] = WorkQueue(
            rate_limiter=default_controller_rate_limiter(
                base_delay=settings.backoff_base_seconds,
                max_delay=settings.backoff_max_seconds,
                qps=settings.queue_qps,
                burst=settings.queue_burst,
                clock=self.clock,
            ),
            clock=self.clock,
            name=QUEUE_NAME,
        )
        self.metrics.track_queue_depth(lambda: len(self.queue))
        self.informers: dict[str, Informer] = {}
        self.stores: Stores | None = None
        self.elector: leaderelection.LeaderElector | None = None
        self.workers: loops.Workers | None = None
        self.recovery: RecoveryProber | None = None
        """Built with the client in `run()`: notices the API server back after an outage."""
        self.started = asyncio.Event()
        """Set once the workers run (after sync and, with leader election, leadership)."""
        self._stop = asyncio.Event()
        self._force = asyncio.Event()

    # --- control -------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Graceful shutdown; a second request skips the rest of the drain (second Ctrl-C)."""
        if self._stop.is_set():
            log.warning("second stop request: not waiting for in-flight reconciles")
            self._force.set()
        else:
            log.info("stopping")
        self._stop.set()

    # --- run -----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Runs until stopped (returns) or until something fatal happens (raises `FatalError`).

        One run per Manager: the queue and the stop request are not reusable."""
        settings = self.settings
        qps, burst, limit_until_apf = client_limit(settings)
        try:
            kube = await Kube.from_kubeconfig(
                settings.kubeconfig,
                server=settings.master,
                limiter=TokenBucket(qps, burst, clock=self.clock),
                limit_until_apf=limit_until_apf,
                retry=RetryPolicy(sleep=self.clock.sleep),
                field_manager=settings.field_manager,
            )
        except Exception as exc:
            source = settings.kubeconfig or "in-cluster config, $KUBECONFIG or ~/.kube/config"
            raise FatalError(
                f"cannot configure the Kubernetes client from {source}: {exc}"
            ) from exc
        # One prober for every informer of this client: however many watches lost the server, it is
        # probed about once a second, and they all resume (jittered) once it answers
        # (`cache.recovery`).
        self.recovery = RecoveryProber(kube.ping, clock=self.clock)
        closers: list[Callable[[], Awaitable[None]]] = [self.recovery.stop, kube.close]
        self.metrics.instrument_api_client(kube.api_client)
        recorder = EventRecorder(kube, now=self._epoch_now)
        closers.insert(0, recorder.close)
        tasks: list[asyncio.Task[Any]] = []
        renew: asyncio.Task[None] | None = None
        lost = False
        try:
            try:
                await self.server.start()
            except OSError as exc:
                raise FatalError(
                    f"cannot serve on --metrics-address {settings.metrics_address}: {exc}"
                ) from exc
            closers.append(self.server.stop)
            self._build_informers(kube, await self._preflight(kube))
            tasks = [
                asyncio.create_task(i.run(), name=f"informer-{n}")
                for n, i in self.informers.items()
            ]
            if not await self._until_stopped(self._wait_for_sync()):
                return
            self.readiness.caches_synced = True
            log.info(
                "caches synced: %s",
                ", ".join(f"{n}={len(i.store)}" for n, i in self.informers.items()),
            )
            if settings.leader_elect:
                self.elector = await self._build_elector(closers)
                if not await self._until_stopped(self.elector.acquire()):
                    return
                renew = asyncio.create_task(self.elector.renew(), name="lease-renew")
            else:
                self.metrics.set_leader(True)
            assert self.stores is not None
            deps = ManagerDeps(
                kube, self.stores, recorder, settings, self.clock, self.metrics, self.now
            )
            self.workers = loops.Workers(
                self.queue,
                self.reconciler_factory(deps),
                count=settings.workers,
                metrics=self.metrics,
                clock=self.clock,
            )
            self.workers.start()
            self.started.set()
            loop = type(asyncio.get_running_loop())
            log.info(
                "started %d workers (event loop %s.%s)",
                settings.workers,
                loop.__module__,
                loop.__qualname__,
            )
            lost = await self._until_fatal(tasks, renew)
        finally:
            await self._shut_down(tasks, renew, lost=lost)
            for close in closers:  # bounded: a dead API server must not hold up the exit
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(CLOSE_TIMEOUT):
                        await close()
        if lost:
            raise leaderelection.LeadershipLost(
                f"lost the lease {settings.lease_namespace}/{settings.lease_name}: stopping so "
                "that only "
                "one operator reconciles (the Deployment restarts this one as a standby)"
            )

    async def _until_fatal(
        self, tasks: list[asyncio.Task[Any]], renew: asyncio.Task[None] | None
    ) -> bool:
        """Waits for a stop request; True if the lease was lost first. Raises if a core task
        died."""
        assert self.workers is not None
        stop = asyncio.create_task(self._stop.wait(), name="stop-request")
        watched: set[asyncio.Task[Any]] = {stop, *tasks, *self.workers.tasks}
        if renew is not None:
            watched.add(renew)
        try:
            done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel([stop])
        if stop in done:
            return False
        if renew is not None and renew in done and renew.exception() is None:
            return True
        crashed = next(t for t in done if t is not stop)
        exc = crashed.exception() if not crashed.cancelled() else None
        raise FatalError(f"{crashed.get_name()} stopped unexpectedly: {exc!r}") from exc

    async def _shut_down(
        self, tasks: list[asyncio.Task[Any]], renew: asyncio.Task[None] | None, *, lost: bool
    ) -> None:
        self.readiness.stopping = True
        await _cancel(tasks)
        if self.workers is not None:
            if lost:
                self.queue.shut_down()
            else:
                await self._drain(self.workers)
            await self.workers.stop()
        else:
            self.queue.shut_down()
        if renew is not None:
            await _cancel([renew])
        if self.elector is not None and not lost:
            await self.elector.release()
        self.metrics.set_leader(False)

    async def _drain(self, running: loops.Workers) -> None:
        async def drain() -> None:
            await self.queue.shut_down_with_drain()
            await running.wait()

        task = asyncio.create_task(drain(), name="drain")
        force = asyncio.create_task(self._force.wait(), name="force-stop")
        grace = asyncio.create_task(self.clock.sleep(self.shutdown_grace), name="shutdown-grace")
        done, _ = await asyncio.wait({task, force, grace}, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            log.warning(
                "in-flight reconciles did not finish within %.1fs; cancelling", self.shutdown_grace
            )
        await _cancel([task, force, grace])

    # --- steps ---------------------------------------------------------------------------------
    def _namespaces(self, resource: Resource) -> tuple[str, ...]:
        return tuple(self.settings.namespaces) if resource.namespaced else ()

    async def _preflight(self, kube: Kube) -> list[handlers.Watch]:
        """The watches to run; raises `FatalError` when one cannot work (missing CRD, RBAC)."""
        served: list[handlers.Watch] = []
        for watch in handlers.watches(self.settings.gang_scheduling, self.selectors):
            if await self._check(kube, watch):
                served.append(watch)
        return served

    async def _check(self, kube: Kube, watch: handlers.Watch) -> bool:
        resource = watch.resource
        for namespace in self._namespaces(resource) or (None,):
            where = f"in namespace {namespace}" if namespace else "cluster-wide"
            try:
                await kube.list(
                    resource,
                    namespace,
                    label_selector=watch.selector,
                    field_selector=PREFLIGHT_NAME,
                )
            except errors.NotFound as exc:
                if (
                    resource is handlers.PRIORITY_CLASS
                ):  # optional: without it every PodGroup gets priority 0
                    log.warning("%s are not served; PodGroups get priority 0", resource.plural)
                    return False
                if resource is resources.MPIJOB:
                    raise CRDNotInstalled(
                        f"the MPIJob CRD ({constants.CRD_NAME}, {constants.API_VERSION}) is not "
                        "installed: apply it first (`mpi-operator crds | kubectl apply -f -`)"
                    ) from exc
                raise CRDNotInstalled(
                    f"--gang-scheduling={self.settings.gang_scheduling} needs the "
                    f"{resource.plural}.{resource.group} CRD ({resource.api_version} is not served)"
                ) from exc
            except (errors.Forbidden, errors.Unauthorized) as exc:
                raise PreflightFailed(
                    f"cannot list {watch.name} {where}: {exc} (check the operator's RBAC and "
                    "credentials)"
                ) from exc
            except errors.KubeError as exc:  # transient: the informers keep retrying
                log.warning("preflight list of %s %s failed: %s", watch.name, where, exc)
        return True

    def _build_informers(self, kube: Kube, watches: list[handlers.Watch]) -> None:
        for watch in watches:
            self.informers[watch.name] = Informer(
                kube.lister_watcher(watch.resource),
                namespaces=self._namespaces(watch.resource),
                label_selector=watch.selector,
                name=watch.name,
                clock=self.clock,
                recovery=self.recovery,
                transform=watch.transform,
            )
        inf = self.informers
        optional = {
            name: inf[name].store if name in inf else None
            for name in ("podgroups", "priorityclasses")
        }
        self.stores = Stores(
            mpijobs=inf["mpijobs"].store,
            pods=inf["pods"].store,
            jobs=inf["jobs"].store,
            services=inf["services"].store,
            config_maps=inf["configmaps"].store,
            secrets=inf["secrets"].store,
            pdbs=inf["poddisruptionbudgets"].store,
            pod_groups=optional["podgroups"],
            priority_classes=optional["priorityclasses"],
        )
        bound = handlers.EventHandlers(
            self._enqueue, mpijobs=self.stores.mpijobs, jobs=self.stores.jobs
        )
        for watch in watches:
            if watch.events == "mpijob":
                bound.register_mpijobs(inf[watch.name])
            elif watch.events == "child" and watch.resource == resources.POD:
                bound.register_pods(inf[watch.name])
            elif watch.events == "child" and watch.resource == resources.JOB:
                bound.register_jobs(inf[watch.name])
            elif watch.events == "child":
                bound.register_children(inf[watch.name])

    def _epoch_now(self) -> float:
        # EventRecorder stamps and aggregates on epoch seconds; the manager's wall clock is `now`.
        return self.now().timestamp()

    def _enqueue(self, key: str, *, urgent: bool = False) -> None:
        self.metrics.queue_add()
        self.queue.add(key, urgent=urgent)

    def _unsynced(self) -> list[str]:
        return [name for name, informer in self.informers.items() if not informer.has_synced]

    async def _wait_for_sync(self) -> None:
        while True:
            unsynced = self._unsynced()
            if not unsynced:
                return
            try:
                async with asyncio.timeout(self.sync_warning_seconds):
                    await asyncio.gather(*(i.wait_for_sync() for i in self.informers.values()))
            except TimeoutError:
                log.warning("still waiting for informer caches to sync: %s", ", ".join(unsynced))

    async def _build_elector(
        self, closers: list[Callable[[], Awaitable[None]]]
    ) -> leaderelection.LeaderElector:
        settings = self.settings
        kube = await Kube.from_kubeconfig(
            settings.kubeconfig,
            server=settings.master,
            qps=0,  # a few requests per retry period: never queue them behind reconciles
            burst=1,
            # the election loop is the retry; a stuck call must not outlive the deadline
            retry=NO_RETRY,
            user_agent=f"{DEFAULT_USER_AGENT} leader-election",
            request_timeout=settings.renew_deadline_seconds,
        )
        self.metrics.instrument_api_client(kube.api_client)
        recorder = EventRecorder(kube, component=LEADER_ELECTION_COMPONENT, now=self._epoch_now)
        closers.insert(0, kube.close)
        closers.insert(0, recorder.close)
        config = leaderelection.LeaderElectionConfig(
            name=settings.lease_name,
            namespace=settings.lease_namespace,
            identity=self.identity,
            lease_duration=settings.lease_duration_seconds,
            renew_deadline=settings.renew_deadline_seconds,
            retry_period=settings.retry_period_seconds,
        )
        elector: leaderelection.LeaderElector

        def started() -> None:
            self.readiness.leading = True
            self.metrics.set_leader(True)
            if (
                elector.lease is not None
            ):  # client-go's "<identity> became leader" Event on the Lease
                recorder.record(
                    elector.lease, "Normal", "LeaderElection", f"{self.identity} became leader"
                )

        def stopped() -> None:
            self.readiness.leading = False
            self.metrics.set_leader(False)

        elector = leaderelection.LeaderElector(
            kube,
            config,
            clock=self.clock,
            wall_clock=self.now,
            on_started_leading=started,
            on_stopped_leading=stopped,
        )
        return elector

    async def _until_stopped(self, aw: Awaitable[T]) -> bool:
        """Awaits `aw` unless a stop is requested first (then cancels it): True if `aw` finished."""
        work = asyncio.ensure_future(aw)
        stop = asyncio.create_task(self._stop.wait(), name="stop-request")
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel([stop])
        if work.done():
            work.result()
            return True
        await _cancel([work])
        return False


async def _cancel(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception:
                log.exception("task failed while stopping")


async def run(settings: Settings, reconciler_factory: ReconcilerFactory, **options: Any) -> None:
    """`mpi-operator run`: a `Manager` that stops gracefully on SIGTERM / SIGINT (see the module
    doc).

    Returns after a graceful stop; raises `FatalError` (exit 1) on a fatal condition."""
    manager = Manager(settings, reconciler_factory, **options)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, manager.request_stop)
    try:
        await manager.run()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
