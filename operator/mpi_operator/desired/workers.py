"""Worker pods `<job>-worker-<i>` (upstream `newWorker`) plus "Ready means sshd answers".

From a deep copy of the Worker template: upstream's labels (template labels overlaid with the job's,
`replica-index` shifted by one when the launcher runs as a worker) plus the legacy pair; `hostname` =
pod name and `subdomain` = the Service; `ClusterFirstWithHostNet` under hostNetwork; the DNS search path
`<job>.<ns>.svc.<cluster domain>` (upstream hard-codes cluster.local); the replica restartPolicy;
`containers[0]` gets `/usr/sbin/sshd -De` when it has neither command nor args, `K_MPI_JOB_ROLE=worker`
appended to its env and the SSH keys (`ssh_auth`); gang scheduling sets the scheduler and group marker.
Resources (GPUs included) pass through untouched.

Improvement (DESIGN.md §5): a `containers[0]` without a readinessProbe gets a TCP probe on its ssh port,
the container port named `ssh` or else 22, so Ready, and therefore discover_hosts.sh and
WaitForWorkersReady, mean the launcher's ssh will connect (Horovod blacklists a host whose launch fails).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming, podgroup, podtemplate, ssh_auth
from mpi_operator.desired.naming import KubeObject
from mpi_operator.settings import GangScheduler

SSHD_COMMAND: Final = ("/usr/sbin/sshd", "-De")
ROLE_ENV: Final = "K_MPI_JOB_ROLE"
SSH_PORT_NAME: Final = "ssh"
DEFAULT_SSH_PORT: Final = 22
READINESS_PERIOD_SECONDS: Final = 2


def worker_env() -> list[KubeObject]:
    """Upstream `workerEnvVars`."""
    return [{"name": ROLE_ENV, "value": c.ROLE_WORKER}]


def ssh_port(container: Mapping[str, Any]) -> int:
    """The container port named `ssh`, else 22."""
    for port in container.get("ports") or []:
        if isinstance(port, Mapping) and port.get("name") == SSH_PORT_NAME:
            number = port.get("containerPort")
            if isinstance(number, int) and not isinstance(number, bool):
                return number
    return DEFAULT_SSH_PORT


def ssh_readiness_probe(container: Mapping[str, Any]) -> KubeObject:
    return {"tcpSocket": {"port": ssh_port(container)}, "periodSeconds": READINESS_PERIOD_SECONDS}


def build_worker(
    job: MPIJob,
    index: int,
    *,
    cluster_domain: str = "",
    gang: GangScheduler | None = None,
    scheduler_plugins_name: str = podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
    hostname: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> KubeObject:
    """The worker pod with index `index` (the job must have a Worker spec).

    `hostname` overrides `spec.hostname` (default: the pod name; elastic jobs pass a name per pod
    incarnation) and `annotations` are merged over the template's; the pod name and labels never change.
    """
    if job.worker is None:
        raise ValueError(f"MPIJob {job.namespace}/{job.name} has no Worker replica spec")
    name = naming.worker_name(job, index)
    template = podtemplate.copy_template(job.worker)
    metadata = template["metadata"]
    metadata["labels"] = podtemplate.merged(
        metadata.get("labels"),
        {
            **naming.pod_labels(job, c.ROLE_WORKER),
            c.LABEL_REPLICA_INDEX: naming.worker_replica_index(job, index),
        },
    )
    spec = template["spec"]
    podtemplate.set_pod_identity(spec, hostname or name, naming.service_name(job))
    dns_config = spec.get("dnsConfig") if isinstance(spec.get("dnsConfig"), dict) else {}
    dns_config["searches"] = [
        *(dns_config.get("searches") or []),
        naming.dns_search_domain(job, cluster_domain),
    ]
    spec["dnsConfig"] = dns_config
    spec["restartPolicy"] = job.worker.restart_policy

    container = spec["containers"][0]
    if not container.get("command") and not container.get("args"):
        container["command"] = list(SSHD_COMMAND)
    podtemplate.append_env(container, worker_env())
    if container.get("readinessProbe") is None:
        container["readinessProbe"] = ssh_readiness_probe(container)
    ssh_auth.setup_ssh_on_pod(spec, job)
    podgroup.decorate_pod_template(template, job, gang, scheduler_plugins_name)

    pod_metadata = naming.object_meta(job, name, template["metadata"]["labels"])
    merged_annotations = {**(template["metadata"].get("annotations") or {}), **(annotations or {})}
    if merged_annotations:
        pod_metadata = {**pod_metadata, "annotations": merged_annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": spec}


def build_workers(
    job: MPIJob,
    *,
    cluster_domain: str = "",
    gang: GangScheduler | None = None,
    scheduler_plugins_name: str = podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
    hostnames: Mapping[int, str] | None = None,
    annotations: Mapping[int, Mapping[str, str]] | None = None,
) -> dict[int, KubeObject]:
    """Worker pods 0..replicas-1, by index; `hostnames` / `annotations` per index as in `build_worker`."""
    if job.worker is None:
        return {}
    return {
        i: build_worker(
            job,
            i,
            cluster_domain=cluster_domain,
            gang=gang,
            scheduler_plugins_name=scheduler_plugins_name,
            hostname=(hostnames or {}).get(i),
            annotations=(annotations or {}).get(i),
        )
        for i in range(job.worker.replicas)
    }
