"""The ConfigMap `<job>-config`: the static `hostfile` and the live `discover_hosts.sh`.

`hostfile` is what static MPI needs: every replica the spec asks for, in upstream's
per-implementation format (the launcher first when it runs as a worker). `discover_hosts.sh` is what
elastic Horovod polls every second: unlike upstream (every Running pod, bare names, sorted as
strings) it lists only workers that can take an ssh connection now: Ready, not terminating, within
the desired replica count, each as `host:slots`, in natural index order, one spelling per host,
because Horovod takes every distinct string for a distinct host. Both formats are owned by
`mpi_discovery.hostfile`; this module decides which hosts go in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from mpi_discovery import hostfile
from mpi_operator import objects
from mpi_operator.api.defaults import launcher_slots, slots_per_worker
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming
from mpi_operator.objects import KubeObject

HOSTFILE_KEY: Final = "hostfile"
DISCOVER_HOSTS_KEY: Final = "discover_hosts.sh"


def worker_replicas(job: MPIJob) -> int:
    """`Worker.replicas`, 0 without a Worker spec (upstream `workerReplicas`)."""
    return job.worker.replicas if job.worker is not None else 0


def static_hosts(
    job: MPIJob, cluster_domain: str = "", hostnames: Mapping[int, str] | None = None
) -> list[hostfile.Host]:
    """Every host of the spec: the launcher first when it runs as a worker, then workers 0..N-1.

    `hostnames` overrides a worker's host name by index (elastic jobs: one per pod incarnation)."""
    hosts: list[hostfile.Host] = []
    if job.spec.run_launcher_as_worker:
        # By its own host name, not upstream's FQDN: only the launcher reads this file, and Intel
        # MPI's hydra takes `<job>-launcher.<job>.<ns>.svc` for another host and ssh'es to itself,
        # where no sshd runs (tests/process/test_mpi_pi_e2e.py); every MPI recognises the plain host
        # name.
        hosts.append((naming.launcher_name(job), launcher_slots(job.spec)))
    slots = slots_per_worker(job.spec)
    names = hostnames or {}
    hosts.extend(
        (naming.host_fqdn(job, names.get(i) or naming.worker_name(job, i), cluster_domain), slots)
        for i in range(worker_replicas(job))
    )
    return hosts


def render_hostfile(
    job: MPIJob, cluster_domain: str = "", hostnames: Mapping[int, str] | None = None
) -> str:
    """The `hostfile` key, exactly upstream's bytes for the same spec and slots (and host names)."""
    return hostfile.render_hostfile(
        static_hosts(job, cluster_domain, hostnames), job.spec.mpi_implementation
    )


def observed_worker_index(job: MPIJob, pod: Mapping[str, Any]) -> int | None:
    """The index of one of this job's worker pods, None for any other pod.

    A worker is named `<job>-worker-<i>`, carries the worker labels and, when the job has a uid, is
    controlled by it; the index comes from the name, which `runLauncherAsWorker` does not shift.
    """
    labels = objects.metadata(pod).get("labels")
    if not isinstance(labels, Mapping) or not naming.has_worker_labels(job, labels):
        return None
    controller = objects.controller_ref(pod)
    if job.uid and controller is not None and controller.get("uid") != job.uid:
        return None
    return naming.worker_index(job, objects.name_of(pod))


def discoverable_workers(
    job: MPIJob, pods: Iterable[Mapping[str, Any]], *, cluster_domain: str = ""
) -> list[hostfile.Host]:
    """`(fqdn, slots)` of the workers Horovod may use now, in natural index order.

    A worker qualifies when it is Ready, not terminating and its index is below the desired replica
    count (scale-in takes the highest indices out of discovery before their pods are deleted). With
    `runLauncherAsWorker` the launcher comes first and is always listed: it is the host running the
    script.
    """
    replicas = worker_replicas(job)
    ready: dict[int, hostfile.Host] = {}
    slots = slots_per_worker(job.spec)
    for pod in pods:
        index = observed_worker_index(job, pod)
        if index is None or index >= replicas or not objects.is_pod_ready(pod):
            continue
        ready[index] = (naming.worker_fqdn(job, index, cluster_domain), slots)
    hosts: list[hostfile.Host] = []
    if job.spec.run_launcher_as_worker:
        hosts.append((naming.launcher_fqdn(job, cluster_domain), launcher_slots(job.spec)))
    hosts.extend(ready[i] for i in sorted(ready))
    return hosts


def build_config_map(
    job: MPIJob,
    pods: Iterable[Mapping[str, Any]] = (),
    *,
    cluster_domain: str = "",
    discovered: Sequence[hostfile.Host] | None = None,
    hostnames: Mapping[int, str] | None = None,
) -> KubeObject:
    """The ConfigMap `<job>-config` with exactly the keys `hostfile` and `discover_hosts.sh`.

    `discovered` overrides the hosts of `discover_hosts.sh` (the elastic pacing decides them);
    without it they are `discoverable_workers(job, pods)`. `hostnames` (by index) are the workers'
    host names in the `hostfile` when they are not the pod names (elastic jobs).
    """
    hosts = (
        list(discovered)
        if discovered is not None
        else discoverable_workers(job, pods, cluster_domain=cluster_domain)
    )
    data = {
        HOSTFILE_KEY: render_hostfile(job, cluster_domain, hostnames),
        DISCOVER_HOSTS_KEY: hostfile.render_discover_hosts(hosts),
    }
    return naming.owned_object(job, "v1", "ConfigMap", naming.config_map_name(job), data=data)
