"""The headless Service `<job>` giving every launcher and worker pod its DNS name (upstream
newJobService).

No ports, `clusterIP: None`, selecting the launcher and the workers by operator and job name.
Upstream sets `publishNotReadyAddresses` to `runLauncherAsWorker` (the launcher must resolve itself
before it is Ready); like Go's `omitempty`, false is left out so the object equals what the API
server returns.
"""

from __future__ import annotations

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.objects import KubeObject


def build_service(job: MPIJob) -> KubeObject:
    spec: KubeObject = {"clusterIP": "None", "selector": naming.service_selector(job)}
    if job.spec.run_launcher_as_worker:
        spec["publishNotReadyAddresses"] = True
    return naming.owned_object(job, "v1", "Service", naming.service_name(job), spec=spec)
