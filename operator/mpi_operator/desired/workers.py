"""Worker pods `<job>-worker-<i>` (upstream `newWorker`) plus "Ready means sshd answers".

From a deep copy of the Worker template, upstream's pod: labels, hostname and subdomain, the DNS
search path (with our cluster domain, not a hard-coded cluster.local), `/usr/sbin/sshd -De` when
`containers[0]` has no command, `K_MPI_JOB_ROLE=worker`, the SSH keys (`ssh_auth`), gang markers;
resources pass through untouched. Beyond upstream: a `containers[0]` without a readinessProbe gets
a TCP probe on its sshd port when the spec names it (`sshd.container_ssh_port`), so Ready means the
launcher's ssh will connect; otherwise no probe, and the planner records `SSHPortUnknown` once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming, podgroup, podtemplate, ssh_auth, sshd
from mpi_operator.objects import KubeObject
from mpi_operator.settings import GangScheduler

SSHD_COMMAND: Final = ("/usr/sbin/sshd", "-De")
ROLE_ENV: Final = "K_MPI_JOB_ROLE"
READINESS_PERIOD_SECONDS: Final = 2


def worker_env() -> list[KubeObject]:
    """Upstream `workerEnvVars`."""
    return [{"name": ROLE_ENV, "value": c.ROLE_WORKER}]


def apply_default_command(container: KubeObject) -> None:
    """Upstream runs `/usr/sbin/sshd -De` in a container that names neither command nor args."""
    if not container.get("command") and not container.get("args"):
        container["command"] = list(SSHD_COMMAND)


def ssh_readiness_probe(container: Mapping[str, Any]) -> KubeObject | None:
    """A TCP probe on the port the container's sshd listens on; None when its spec does not say
    which.

    `container` as the pod runs it, with `apply_default_command` applied.
    """
    port = sshd.container_ssh_port(container)
    if port is None:
        return None
    return {"tcpSocket": {"port": port}, "periodSeconds": READINESS_PERIOD_SECONDS}


def ssh_port_unknown(job: MPIJob) -> bool:
    """Whether the workers run without any readiness probe because their sshd port is unknown."""
    if job.worker is None:
        return False
    container = podtemplate.copy_template(job.worker)["spec"]["containers"][0]
    if container.get("readinessProbe") is not None:
        return False
    apply_default_command(container)
    return ssh_readiness_probe(container) is None


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
    incarnation) and `annotations` are merged over the template's; the pod name and labels never
    change.
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
    podtemplate.set_pod_identity(
        spec,
        hostname or name,
        naming.service_name(job),
        naming.dns_search_domain(job, cluster_domain),
    )
    spec["restartPolicy"] = job.worker.restart_policy
    podtemplate.set_priority_class(spec, job)

    container = spec["containers"][0]
    apply_default_command(container)
    podtemplate.append_env(container, worker_env())
    if container.get("readinessProbe") is None:
        probe = ssh_readiness_probe(container)
        if probe is not None:
            container["readinessProbe"] = probe
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
    indices: Iterable[int] | None = None,
) -> dict[int, KubeObject]:
    """Worker pods 0..replicas-1, by index; `hostnames` / `annotations` per index as in
    `build_worker`.

    `indices`: only these (those outside 0..replicas-1 are ignored); None: every one."""
    lazy = LazyWorkers(
        job,
        cluster_domain=cluster_domain,
        gang=gang,
        scheduler_plugins_name=scheduler_plugins_name,
        hostnames=hostnames,
        annotations=annotations,
        indices=indices,
    )
    return {index: lazy[index] for index in lazy}


class LazyWorkers(Mapping[int, KubeObject]):
    """`build_workers` as a mapping that builds a worker pod when it is first read.

    A sync needs the desired pod of a worker only to create it, and most syncs of a running job
    create none (docs/architecture.md#decisions-and-why). Iterating gives the indices without
    building anything; equality compares as the plain dict would.
    """

    def __init__(
        self,
        job: MPIJob,
        *,
        cluster_domain: str = "",
        gang: GangScheduler | None = None,
        scheduler_plugins_name: str = podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
        hostnames: Mapping[int, str] | None = None,
        annotations: Mapping[int, Mapping[str, str]] | None = None,
        indices: Iterable[int] | None = None,
    ) -> None:
        """`indices`: only these workers (those outside 0..replicas-1 are ignored); None: every
        one."""
        self._job = job
        self._cluster_domain = cluster_domain
        self._gang = gang
        self._scheduler_plugins_name = scheduler_plugins_name
        self._hostnames = hostnames or {}
        self._annotations = annotations or {}
        count = job.worker.replicas if job.worker is not None else 0
        self._indices: Sequence[int] = (
            range(count) if indices is None else sorted(i for i in set(indices) if 0 <= i < count)
        )
        self._built: dict[int, KubeObject] = {}

    def __contains__(self, index: object) -> bool:
        # Mapping's own `in` reads the item, which would build the pod.
        return isinstance(index, int) and index in self._indices

    def __getitem__(self, index: int) -> KubeObject:
        if index not in self:
            raise KeyError(index)
        pod = self._built.get(index)
        if pod is None:
            pod = build_worker(
                self._job,
                index,
                cluster_domain=self._cluster_domain,
                gang=self._gang,
                scheduler_plugins_name=self._scheduler_plugins_name,
                hostname=self._hostnames.get(index),
                annotations=self._annotations.get(index),
            )
            self._built[index] = pod
        return pod

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)
