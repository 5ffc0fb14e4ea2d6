"""Pure desired state: an MPIJob (+ its observed worker pods) -> the exact child objects it should
own.

Every builder takes data and returns new plain JSON dicts (never mutating its inputs) in upstream
Kubeflow MPI Operator v2beta1's wire format, plus the improvements `docs/architecture.md` lists.
`build()` is the one entry point the reconciler calls; the submodules own one object each: `naming`
(names, labels, owner references, FQDNs), `service`, `config` (hostfile, discover_hosts.sh),
`secret` (SSH keys), `ssh_auth` (how the keys are mounted), `workers`, `launcher`, `podtemplate`
(what the two share), `podgroup` (gang scheduling), `pdb` (the workers' disruption budget),
`resources` (GPUs, slots, quantities).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, launcher, pdb, podgroup, service, workers
from mpi_operator.desired.config import discoverable_workers
from mpi_operator.desired.secret import SSHKeyPair, build_secret, generate_ssh_keys
from mpi_operator.objects import KubeObject
from mpi_operator.settings import Settings


@dataclass(frozen=True)
class ElasticInputs:
    """What an elastic job's step decides for the builders (`mpi_operator.elastic.sync` makes it;
    this package never imports the elastic one, so the values come by value)."""

    launcher_env: tuple[KubeObject, ...] = ()
    """Extra launcher env vars: the bounds for horovodrun."""
    pod_group_min_member: int | None = None
    """The gang size: minReplicas + 1 instead of every worker."""
    discovered: tuple[tuple[str, int], ...] | None = None
    """The hosts and slots of `discover_hosts.sh` (the pacing decides them); None: the Ready
    workers."""
    worker_hostnames: Mapping[int, str] | None = None
    """A host name per worker index: one per pod incarnation, so a replacement is a new host."""
    worker_annotations: Mapping[int, Mapping[str, str]] | None = None
    config_map_annotations: Mapping[str, str] | None = None
    """The published elastic state, written with the script it describes."""


@dataclass(frozen=True)
class DesiredState:
    """The children one MPIJob should have right now.

    `workers` (by index) and `pod_group` are empty / None while the job is suspended, as upstream
    creates neither then; `workers` holds only the indices `build` was asked for. `secret` is None
    when no key pair was supplied: the Secret's values are never compared, so a reconcile generates
    keys only when the Secret is missing or its key set is wrong (`secret.has_expected_keys`).
    """

    service: KubeObject
    config_map: KubeObject
    secret: KubeObject | None
    launcher_job: KubeObject
    workers: Mapping[int, KubeObject] = field(default_factory=dict)
    """Built when read (`workers.LazyWorkers`): a sync reads only the pods it creates."""
    pod_group: KubeObject | None = None
    pdb: KubeObject | None = None
    """The workers' PodDisruptionBudget, when the job gets one (`pdb.min_available`)."""


def build(
    job: MPIJob,
    *,
    observed_pods: Iterable[Mapping[str, Any]] = (),
    settings: Settings,
    ssh_keys: SSHKeyPair | None = None,
    priority_classes: Mapping[str, int] | None = None,
    scheduler_plugins_name: str | None = None,
    elastic: ElasticInputs | None = None,
    worker_indices: Iterable[int] | None = None,
) -> DesiredState:
    """Everything `job` should own, from the job, its observed pods and the operator settings.

    `priority_classes` maps PriorityClass names to values (for PodGroup minResources); `elastic` is
    an elastic job's step output (without it, `discover_hosts.sh` lists the observed workers that
    are Ready and not terminating). `worker_indices`: build only these workers
    (`planning.worker_window`: the missing ones one sync may create); None: every one.
    """
    domain = settings.cluster_domain
    gang = settings.gang_scheduling
    if scheduler_plugins_name is None:
        scheduler_plugins_name = settings.scheduler_plugins_name
    suspended = job.spec.run_policy.suspend
    inputs = elastic if elastic is not None else ElasticInputs()
    config_map = config.build_config_map(
        job,
        observed_pods,
        cluster_domain=domain,
        discovered=inputs.discovered,
        hostnames=inputs.worker_hostnames,
    )
    if inputs.config_map_annotations:
        config_map["metadata"]["annotations"] = {
            **(config_map["metadata"].get("annotations") or {}),
            **inputs.config_map_annotations,
        }
    return DesiredState(
        service=service.build_service(job),
        config_map=config_map,
        secret=build_secret(job, ssh_keys) if ssh_keys is not None else None,
        launcher_job=launcher.build_launcher_job(
            job,
            gang=gang,
            scheduler_plugins_name=scheduler_plugins_name,
            extra_env=inputs.launcher_env,
            cluster_domain=domain,
        ),
        workers={}
        if suspended
        else workers.LazyWorkers(
            job,
            cluster_domain=domain,
            gang=gang,
            scheduler_plugins_name=scheduler_plugins_name,
            hostnames=inputs.worker_hostnames,
            annotations=inputs.worker_annotations,
            indices=worker_indices,
        ),
        pod_group=None
        if suspended or gang is None
        else podgroup.build_pod_group(
            job, gang, priority_classes or {}, min_member=inputs.pod_group_min_member
        ),
        pdb=pdb.build_pdb(job),
    )


__all__ = [
    "DesiredState",
    "ElasticInputs",
    "SSHKeyPair",
    "build",
    "discoverable_workers",
    "generate_ssh_keys",
]
