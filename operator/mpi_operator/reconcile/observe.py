"""Stores -> `planning.Observed`: what the informer caches hold for one MPIJob, read without any
LIST.

Singleton children are looked up by their deterministic *name*, whoever controls them, so that an
object in the way (not controlled by the job) surfaces in the plan as a conflict instead of being
recreated or adopted. Worker pods are the job's controlled pods (owner index) plus any pod cached
under a desired worker name (and the worker pods just created that the store does not show yet);
launcher pods are the pods the launcher Job controls.

With label-filtered informers a foreign object without our labels is not cached at all: the plan
then asks to create it and the applier finds it behind the 409 (see `applier`).
"""

from __future__ import annotations

from collections.abc import Iterable

from mpi_operator.api.models import MPIJob
from mpi_operator.cache.store import Store
from mpi_operator.desired import config, naming
from mpi_operator.objects import KubeObject, name_of, uid_of
from mpi_operator.planning import Observed
from mpi_operator.runtime.types import Stores


def _get(store: Store | None, namespace: str, name: str) -> KubeObject | None:
    return store.get(f"{namespace}/{name}") if store is not None else None


def observe(stores: Stores, job: MPIJob, in_flight: Iterable[KubeObject] = ()) -> Observed:
    """The children of `job` as the stores hold them now (read-only snapshots: never mutate them).

    `in_flight`: worker pods this operator created that the pod store may not show yet
    (`expectations.CreatedPods`); each counts as observed unless the store has a pod of that
    name."""
    ns = job.namespace
    launcher = _get(stores.jobs, ns, naming.launcher_name(job))
    workers: dict[str, KubeObject] = {}
    for pod in stores.pods.controlled_by(job.uid):
        workers[str(pod["metadata"]["name"])] = pod
    for pod in in_flight:
        name = name_of(pod)
        if name not in workers and _get(stores.pods, ns, name) is None:
            workers[name] = pod
    for index in range(config.worker_replicas(job)):
        name = naming.worker_name(job, index)
        stranger = _get(stores.pods, ns, name) if name not in workers else None
        if stranger is not None:
            workers[name] = stranger
    launcher_uid = uid_of(launcher) if launcher is not None else None
    return Observed(
        service=_get(stores.services, ns, naming.service_name(job)),
        config_map=_get(stores.config_maps, ns, naming.config_map_name(job)),
        secret=_get(stores.secrets, ns, naming.ssh_secret_name(job)),
        launcher_job=launcher,
        launcher_pods=tuple(stores.pods.controlled_by(launcher_uid)) if launcher_uid else (),
        worker_pods=tuple(workers.values()),
        pod_group=_get(stores.pod_groups, ns, naming.pod_group_name(job)),
        pdb=_get(stores.pdbs, ns, naming.pdb_name(job)),
    )


def priority_classes(stores: Stores) -> dict[str, int]:
    """PriorityClass name -> value (PodGroup priorities under gang scheduling); empty without the
    store."""
    if stores.priority_classes is None:
        return {}
    out: dict[str, int] = {}
    for pc in stores.priority_classes.list():
        name = name_of(pc)
        value = pc.get("value")
        if name and isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out
