"""Pure desired state: an MPIJob (+ its observed worker pods) -> the exact child objects it should own.

Every builder takes data and returns new plain JSON dicts (never mutating its inputs) in upstream
Kubeflow MPI Operator v2beta1's wire format, plus DESIGN.md §5's improvements. `build()` is the one entry
point the reconciler calls; the submodules own one object each:
`naming` (names, labels, owner references, FQDNs), `service`, `config` (hostfile, discover_hosts.sh),
`secret` (SSH keys), `ssh_auth` (how the keys are mounted), `workers`, `launcher`, `podtemplate` (what
the two share), `podgroup` (gang scheduling), `resources` (GPUs, slots, quantities).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mpi_operator.api.models import MPIJob
from mpi_operator.desired import config, launcher, podgroup, service, workers
from mpi_operator.desired.config import discoverable_workers
from mpi_operator.desired.naming import KubeObject
from mpi_operator.desired.secret import SSHKeyPair, build_secret, generate_ssh_keys
from mpi_operator.settings import Settings


@dataclass(frozen=True)
class DesiredState:
    """The children one MPIJob should have right now.

    `workers` (by index) and `pod_group` are empty / None while the job is suspended, as upstream creates
    neither then. `secret` is None when no key pair was supplied: the Secret's values are never compared,
    so a reconcile generates keys only when the Secret is missing or its key set is wrong
    (`secret.has_expected_keys`).
    """

    service: KubeObject
    config_map: KubeObject
    secret: KubeObject | None
    launcher_job: KubeObject
    workers: dict[int, KubeObject] = field(default_factory=dict)
    pod_group: KubeObject | None = None


def build(
    job: MPIJob,
    *,
    observed_pods: Iterable[Mapping[str, Any]] = (),
    settings: Settings,
    ssh_keys: SSHKeyPair | None = None,
    priority_classes: Mapping[str, int] | None = None,
    discovered: Sequence[tuple[str, int]] | None = None,
    scheduler_plugins_name: str = podgroup.DEFAULT_SCHEDULER_PLUGINS_NAME,
    worker_hostnames: Mapping[int, str] | None = None,
    worker_annotations: Mapping[int, Mapping[str, str]] | None = None,
    config_map_annotations: Mapping[str, str] | None = None,
    launcher_extra_env: Sequence[KubeObject] = (),
    pod_group_min_member: int | None = None,
) -> DesiredState:
    """Everything `job` should own, from the job, its observed pods and the operator settings.

    `priority_classes` maps PriorityClass names to values (for PodGroup minResources); `discovered`
    overrides the hosts of `discover_hosts.sh` (the elastic pacing decides them), which otherwise are
    the observed workers that are Ready and not terminating. The elastic layer also passes, by value (this
    package never imports it): `worker_hostnames` / `worker_annotations` per index (a host identity per
    pod incarnation), `config_map_annotations` (its published state, written with the script),
    `launcher_extra_env` (the bounds for horovodrun) and `pod_group_min_member` (minReplicas + 1).
    """
    domain = settings.cluster_domain
    gang = settings.gang_scheduling
    suspended = job.spec.run_policy.suspend
    config_map = config.build_config_map(
        job, observed_pods, cluster_domain=domain, discovered=discovered, hostnames=worker_hostnames
    )
    if config_map_annotations:
        config_map["metadata"]["annotations"] = {
            **(config_map["metadata"].get("annotations") or {}),
            **config_map_annotations,
        }
    return DesiredState(
        service=service.build_service(job),
        config_map=config_map,
        secret=build_secret(job, ssh_keys) if ssh_keys is not None else None,
        launcher_job=launcher.build_launcher_job(
            job,
            gang=gang,
            scheduler_plugins_name=scheduler_plugins_name,
            extra_env=launcher_extra_env,
            cluster_domain=domain,
        ),
        workers={}
        if suspended
        else workers.build_workers(
            job,
            cluster_domain=domain,
            gang=gang,
            scheduler_plugins_name=scheduler_plugins_name,
            hostnames=worker_hostnames,
            annotations=worker_annotations,
        ),
        pod_group=None
        if suspended or gang is None
        else podgroup.build_pod_group(job, gang, priority_classes or {}, min_member=pod_group_min_member),
    )


__all__ = [
    "DesiredState",
    "SSHKeyPair",
    "build",
    "discoverable_workers",
    "generate_ssh_keys",
]
