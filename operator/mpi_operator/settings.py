"""Operator settings: one frozen object built from the command line, passed explicitly to every layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GangScheduler = Literal["volcano", "scheduler-plugins"]


@dataclass(frozen=True)
class Settings:
    # --- watching -----------------------------------------------------------------------------
    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means all."""
    kubeconfig: str | None = None
    """Kubeconfig path; None means in-cluster config (or $KUBECONFIG / ~/.kube/config when present)."""

    # --- queueing and API pressure ------------------------------------------------------------
    workers: int = 2
    """Concurrent reconciles (never two for one job)."""
    qps: float = 20.0
    """Client-side limit of API requests per second (token bucket)...

    controller-runtime's default rather than client-go's 5: an elastic job's host changes wait in this
    bucket behind every other job's writes (about 14 per job created), and bench/operator_elastic.py
    measured 50 jobs taking 140 s to start and a lost host 3-8 s to leave discovery at 5/10."""
    burst: int = 30
    """... with this burst."""
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
    log_format: Literal["json", "text"] = "text"

    # --- MPI ----------------------------------------------------------------------------------
    cluster_domain: str = ""
    """Appended to worker host names (`<pod>.<job>.<ns>.svc[.<domain>]`) when set."""
    gpus_per_node: int = 1
    """v1alpha1 `gpus` split: workers = gpus / gpus_per_node (manifests may say gpusPerNode)."""
    gang_scheduling: GangScheduler | None = None
    max_workers_per_job: int | None = None
    """The most workers one MPIJob may have; None: the API's ceiling (`api.constants.MAX_WORKER_REPLICAS`,
    which the CRD enforces). It may only lower the ceiling (`api.validation.worker_limit`); a job above it
    gets the Invalid condition naming the field and the limit."""
    field_manager: str = "mpi-operator"
