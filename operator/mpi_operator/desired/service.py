"""The headless Service `<job>` giving every launcher and worker pod its DNS name (upstream newJobService).

No ports, `clusterIP: None`, selecting the launcher and the workers by operator and job name. Upstream sets
`publishNotReadyAddresses` to `runLauncherAsWorker` (the launcher must resolve itself before it is Ready);
like Go's `omitempty`, false is left out so the object equals what the API server returns.
"""

from __future__ import annotations

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.desired.naming import KubeObject


def build_service(job: MPIJob) -> KubeObject:
    spec: KubeObject = {"clusterIP": "None", "selector": naming.service_selector(job)}
    if job.spec.run_launcher_as_worker:
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": naming.object_meta(job, naming.service_name(job), naming.app_labels(job)),
        "spec": spec,
    }
