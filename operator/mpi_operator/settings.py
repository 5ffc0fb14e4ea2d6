"""Operator settings: one frozen object built from the command line, passed explicitly to every
layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

GangScheduler = Literal["volcano", "scheduler-plugins"]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["json", "text"]

DEFAULT_SCHEDULER_PLUGINS_NAME: Final = "scheduler-plugins-scheduler"
"""The scheduler-plugins scheduler's name in its own Helm chart and in upstream's e2e setup."""


FALLBACK_QPS: Final = 20.0
"""The limit without APF: controller-runtime's former default rather than client-go's 5, since an
elastic job's host changes wait in the bucket behind every other job's writes."""
FALLBACK_BURST: Final = 30


@dataclass(frozen=True)
class Settings:
    # --- watching -----------------------------------------------------------------------------
    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means all."""
    kubeconfig: str | None = None
    """Kubeconfig path; None means in-cluster config (or $KUBECONFIG / ~/.kube/config when
    present)."""
    master: str | None = None
    """API server URL overriding the kubeconfig's (upstream's `--master`); alone, a bare
    connection."""

    # --- queueing and API pressure ------------------------------------------------------------
    workers: int = 2
    """Concurrent reconciles (never two for one job)."""
    qps: float | None = None
    """Client-side limit of API requests per second (token bucket). None: none once the server shows
    it has API Priority and Fairness (every supported Kubernetes version), `FALLBACK_QPS` before
    that or without it; a positive value always limits; zero or negative never does."""
    burst: int | None = None
    """... with this burst (None: `FALLBACK_BURST`)."""
    queue_qps: float = 10.0
    """Global rate limit of the work queue's retries."""
    queue_burst: int = 100
    backoff_base_seconds: float = 0.005
    """Per-key exponential backoff of failing reconciles starts here ..."""
    backoff_max_seconds: float = 1000.0
    """... and is capped here (client-go's defaults)."""

    # --- leadership and serving ---------------------------------------------------------------
    leader_elect: bool = True
    lease_name: str = "mpi-operator"
    lease_namespace: str = "mpi-operator"
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    metrics_address: str = "0.0.0.0:8080"
    """Serves /healthz, /readyz and /metrics."""
    log_format: LogFormat = "text"
    log_level: LogLevel = "info"

    # --- MPI ----------------------------------------------------------------------------------
    cluster_domain: str = ""
    """Appended to worker host names (`<pod>.<job>.<ns>.svc[.<domain>]`) when set."""
    gpus_per_node: int = 1
    """v1alpha1 `gpus` split: workers = gpus / gpus_per_node (manifests may say gpusPerNode)."""
    gang_scheduling: GangScheduler | None = None
    scheduler_plugins_name: str = DEFAULT_SCHEDULER_PLUGINS_NAME
    """`schedulerName` of pods with scheduler-plugins gang scheduling (upstream's
    `--gang-scheduling` value names it)."""
    max_workers_per_job: int | None = None
    """The most workers one MPIJob may have; None: the API's ceiling
    (`api.constants.MAX_WORKER_REPLICAS`, which the CRD enforces). It may only lower the ceiling
    (`api.validation.worker_limit`); a job above it gets the Invalid condition naming the field and
    the limit."""
    field_manager: str = "mpi-operator"
    progress_batch_seconds: float = 1.0
    """How long a static job's progress writes (counts, Running, discover_hosts.sh) may wait for its
    other pods, counted from its last such write (`planning.progress`); 0 writes each at once."""


def client_limit(settings: Settings) -> tuple[float, int, bool]:
    """(qps, burst, lifted once the server shows APF) of the operator's API client."""
    qps = settings.qps if settings.qps is not None else FALLBACK_QPS
    burst = settings.burst if settings.burst is not None else FALLBACK_BURST
    return qps, burst, settings.qps is None
