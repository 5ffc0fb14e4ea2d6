"""Prometheus metrics of one operator process, in its own `CollectorRegistry` (never the global one,
so tests can run several managers in one interpreter), and the hooks that update them.

Upstream's job metrics keep their names (`mpi_operator_jobs_created_total`, `..._successful_total`,
`..._failed_total`, bumped on the transition only; `mpi_operator_job_info`, `..._is_leader`). The
runtime adds client-go's work-queue and REST client metrics and controller-runtime-style reconcile
metrics (with the reconciles that sent no write, counted through a context variable that the
instrumented API client bumps); elastic jobs add discovery updates, worker replacements, convergence
time, and per running job `mpi_operator_elastic_workers{state}` and `..._min_replicas`, dropped when
the job finishes, is suspended or goes away. `docs/metrics-and-events.md` lists them all.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

ReconcileOutcome = Literal["success", "requeue_after", "error", "permanent_error"]
WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
QUEUE_NAME: Final = "mpijobs"
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
# Elastic convergence: one worker start plus the settle interval(s), from about a second to minutes.
_CONVERGENCE_BUCKETS: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Reconciles range from a cache hit (~1 ms) to several API round trips under retries (~seconds).
_RECONCILE_BUCKETS: Final = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class SyncWrites:
    """The writes sent by one reconcile (tasks it starts share the count: they copy the context)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


_SYNC_WRITES: contextvars.ContextVar[SyncWrites | None] = contextvars.ContextVar(
    "sync_writes", default=None
)


def is_event_path(path: str) -> bool:
    """An Event's URL (core or events.k8s.io): the recorder's best-effort writes, which a sync
    leaves behind in a task of its own, are not the sync's writes."""
    segments = path.split("/")
    try:
        at = segments.index("namespaces")
    except ValueError:
        return False
    return len(segments) > at + 2 and segments[at + 2] == "events"


class Metrics:
    """All metric objects of one process; `render()` is what /metrics serves."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        # --- upstream's job metrics (names are a contract with existing dashboards) ---------------
        self.jobs_created = Counter(
            "mpi_operator_jobs_created", "Counts number of MPI jobs created", registry=r
        )
        self.jobs_successful = Counter(
            "mpi_operator_jobs_successful", "Counts number of MPI jobs successful", registry=r
        )
        self.jobs_failed = Counter(
            "mpi_operator_jobs_failed", "Counts number of MPI jobs failed", registry=r
        )
        self.job_info = Gauge(
            "mpi_operator_job_info",
            "Information about MPIJob",
            ["launcher", "namespace"],
            registry=r,
        )
        self.is_leader = Gauge(
            "mpi_operator_is_leader",
            "Is this client the leader of this mpi-operator client set?",
            registry=r,
        )
        # --- work queue (client-go workqueue metric names) ---------------------------------------
        self.queue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", ["name"], registry=r
        )
        self.queue_adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", ["name"], registry=r
        )
        self.queue_retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            ["name"],
            registry=r,
        )
        # --- reconciles ---------------------------------------------------------------------------
        self.reconcile_duration = Histogram(
            "mpi_operator_reconcile_duration_seconds",
            "Time spent in one reconcile of an MPIJob",
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.reconciles = Counter(
            "mpi_operator_reconcile", "Reconciles by outcome", ["result"], registry=r
        )
        self.reconcile_errors = Counter(
            "mpi_operator_reconcile_errors", "Reconciles that raised (retried or not)", registry=r
        )
        self.reconciles_without_writes = Counter(
            "mpi_operator_reconcile_without_writes",
            "Reconciles that sent no write to the API server (Events aside)",
            registry=r,
        )
        self.reconciles_echoes = Counter(
            "mpi_operator_reconcile_echoes",
            "Reconciles that found only the echoes of the operator's own writes (nothing planned)",
            registry=r,
        )
        # --- elastic jobs -------------------------------------------------------------------------
        self.discovery_updates = Counter(
            "mpi_operator_elastic_discovery_updates",
            "Changes of discover_hosts.sh published for elastic jobs",
            registry=r,
        )
        self.worker_replacements = Counter(
            "mpi_operator_elastic_worker_replacements",
            "Failed, evicted or deleted workers of elastic jobs deleted to be replaced",
            registry=r,
        )
        self.elastic_convergence = Histogram(
            "mpi_operator_elastic_convergence_seconds",
            "Time from discovered workers differing from the desired count until they match again",
            buckets=_CONVERGENCE_BUCKETS,
            registry=r,
        )
        self.elastic_workers = Gauge(
            "mpi_operator_elastic_workers",
            "Workers of a running elastic MPIJob: desired, ready (usable by Horovod) and "
            "discovered "
            "(listed by discover_hosts.sh)",
            ["namespace", "mpijob", "state"],
            registry=r,
        )
        self.elastic_min_replicas = Gauge(
            "mpi_operator_elastic_min_replicas",
            "Effective elasticPolicy.minReplicas of a running elastic MPIJob",
            ["namespace", "mpijob"],
            registry=r,
        )
        self.pending_workers = Gauge(
            "mpi_operator_job_pending_workers",
            "Workers of a running (not finished, not suspended) MPIJob that the scheduler could "
            "not place "
            "(PodScheduled=False, Unschedulable)",
            ["namespace", "mpijob"],
            registry=r,
        )
        # --- API client ---------------------------------------------------------------------------
        self.api_requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests to the API server, partitioned by status code and method",
            ["code", "method"],
            registry=r,
        )
        self._children: dict[tuple[Counter, tuple[str, ...]], Any] = {}
        self._elastic_jobs: set[tuple[str, str]] = set()
        """Jobs with elastic series: removing absent ones (every static job's sync) raised and
        caught four KeyErrors per sync."""

    # --- hooks for the reconciler -----------------------------------------------------------------
    def job_created(self) -> None:
        """An MPIJob was seen for the first time (its Created condition was just set)."""
        self.jobs_created.inc()

    def job_succeeded(self) -> None:
        """An MPIJob turned Succeeded (call on the transition only)."""
        self.jobs_successful.inc()

    def job_failed(self) -> None:
        """An MPIJob turned Failed (call on the transition only)."""
        self.jobs_failed.inc()

    def set_job_info(self, *, launcher: str, namespace: str) -> None:
        """Upstream sets this to 1 when the launcher Job is created."""
        self.job_info.labels(launcher=launcher, namespace=namespace).set(1)

    def remove_job_info(self, *, launcher: str, namespace: str) -> None:
        """Drops the series once the MPIJob is gone (upstream never does, so its series only
        grow)."""
        with contextlib.suppress(KeyError):
            self.job_info.remove(launcher, namespace)

    def echo_skipped(self) -> None:
        """A sync found nothing but the echoes of the operator's own writes (`reconcile.echoes`)."""
        self.reconciles_echoes.inc()

    def discovery_updated(self) -> None:
        """An elastic job's discover_hosts.sh changed (the ConfigMap write succeeded)."""
        self.discovery_updates.inc()

    def workers_replaced(self, count: int) -> None:
        if count:
            self.worker_replacements.inc(count)

    def observe_elastic_convergence(self, seconds: float) -> None:
        self.elastic_convergence.observe(seconds)

    def set_elastic_workers(
        self,
        *,
        namespace: str,
        mpijob: str,
        desired: int,
        ready: int,
        discovered: int,
        min_replicas: int,
    ) -> None:
        """The worker counts of one running elastic job, from the `status.elastic` its sync
        computed."""
        for state, value in (("desired", desired), ("ready", ready), ("discovered", discovered)):
            self.elastic_workers.labels(namespace=namespace, mpijob=mpijob, state=state).set(value)
        self.elastic_min_replicas.labels(namespace=namespace, mpijob=mpijob).set(min_replicas)
        self._elastic_jobs.add((namespace, mpijob))

    def remove_elastic_workers(self, *, namespace: str, mpijob: str) -> None:
        """Drops a job's elastic series: finished, suspended or deleted jobs have no floor to fall
        below."""
        if (namespace, mpijob) not in self._elastic_jobs:
            return
        self._elastic_jobs.discard((namespace, mpijob))
        for state in ("desired", "ready", "discovered"):
            with contextlib.suppress(KeyError):
                self.elastic_workers.remove(namespace, mpijob, state)
        with contextlib.suppress(KeyError):
            self.elastic_min_replicas.remove(namespace, mpijob)

    def set_pending_workers(self, *, namespace: str, mpijob: str, pending: int) -> None:
        self.pending_workers.labels(namespace=namespace, mpijob=mpijob).set(pending)

    def remove_pending_workers(self, *, namespace: str, mpijob: str) -> None:
        """Drops a finished, suspended or deleted job's series."""
        with contextlib.suppress(KeyError):
            self.pending_workers.remove(namespace, mpijob)

    # --- hooks for the runtime --------------------------------------------------------------------
    def set_leader(self, leading: bool) -> None:
        self.is_leader.set(1 if leading else 0)

    def track_queue_depth(self, depth: Callable[[], float], *, name: str = QUEUE_NAME) -> None:
        """Reads the depth lazily at scrape time instead of updating a gauge on every add/get."""
        self.queue_depth.labels(name=name).set_function(depth)

    def queue_add(self, *, name: str = QUEUE_NAME) -> None:
        self._child(self.queue_adds, name).inc()

    def queue_retry(self, *, name: str = QUEUE_NAME) -> None:
        self._child(self.queue_retries, name).inc()

    def _child(self, counter: Counter, *values: str) -> Any:
        """`counter.labels(*values)`, looked up once: `labels()` checks and joins its arguments on
        every call, and the series counted per request, queue add or reconcile are never removed
        (one lookup each was ~4 % of a fan-in's CPU)."""
        child = self._children.get((counter, values))
        if child is None:
            child = self._children[counter, values] = counter.labels(*values)
        return child

    @contextlib.contextmanager
    def counting_writes(self) -> Iterator[SyncWrites]:
        """Counts the writes the instrumented API client sends inside the block (one reconcile)."""
        writes = SyncWrites()
        token = _SYNC_WRITES.set(writes)
        try:
            yield writes
        finally:
            _SYNC_WRITES.reset(token)

    def observe_reconcile(
        self, seconds: float, outcome: ReconcileOutcome, *, writes: int | None = None
    ) -> None:
        """One reconcile; `writes`: how many it sent (None: not counted)."""
        self.reconcile_duration.observe(seconds)
        self._child(self.reconciles, outcome).inc()
        if outcome in ("error", "permanent_error"):
            self.reconcile_errors.inc()
        if writes == 0:
            self.reconciles_without_writes.inc()

    def observe_api_request(self, method: str, code: str) -> None:
        """One HTTP request and its status code ("<error>" when there was no answer)."""
        self._child(self.api_requests, code, method.upper()).inc()

    def instrument_api_client(self, api_client: Any) -> None:
        """Counts every HTTP request of a kubernetes_asyncio `ApiClient` (`kube.Kube.api_client`).

        Wraps `call_api` on that instance: `Kube` has no response hook (yet), and `call_api` is the
        one call every request, watches included, goes through. `Kube` reads raw responses
        (`_preload_content=False`), so error statuses come back here as responses, not
        exceptions."""
        call_api = api_client.call_api

        async def counted(resource_path: str, method: str, *args: Any, **kwargs: Any) -> Any:
            if method.upper() in WRITE_METHODS and not is_event_path(resource_path):
                sync = _SYNC_WRITES.get()
                if sync is not None:
                    sync.count += 1
            try:
                response = await call_api(resource_path, method, *args, **kwargs)
            except Exception:
                self.observe_api_request(method, "<error>")
                raise
            self.observe_api_request(method, str(getattr(response, "status", "<error>")))
            return response

        api_client.call_api = counted

    def render(self) -> bytes:
        """The registry in Prometheus' text exposition format."""
        return generate_latest(self.registry)
