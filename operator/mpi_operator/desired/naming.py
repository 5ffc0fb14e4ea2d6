"""Names, labels, owner references and DNS names of every object an MPIJob owns (upstream's wire
format).

Child names are deterministic (`<job>`, `<job>-config`, `<job>-ssh`, `<job>-worker-<i>`,
`<job>-launcher`, the PodDisruptionBudget `<job>-workers`), so a reconcile can find its children by
name and a crash loses nothing. Pods carry upstream's `training.kubeflow.org/*` labels plus the
pre-v2 `mpi_job_name` / `mpi_role_type` pair, so old
`kubectl get pods -l mpi_job_name=X,mpi_role_type=launcher` recipes still work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator import objects
from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.objects import KubeObject

LAUNCHER_SUFFIX: Final = "-launcher"
WORKER_SUFFIX: Final = "-worker"
CONFIG_SUFFIX: Final = "-config"
SSH_AUTH_SECRET_SUFFIX: Final = "-ssh"
DEFAULT_CLUSTER_DOMAIN: Final = "cluster.local"
"""What upstream hard-codes in the workers' DNS search path; we use it only when none is
configured."""

LABEL_APP: Final = "app"
"""The only label of the Service, ConfigMap, Secret and launcher Job (upstream)."""

_WORKER_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


def service_name(job: MPIJob) -> str:
    """The headless Service `<job>`; also every pod's `subdomain`."""
    return job.name


def config_map_name(job: MPIJob) -> str:
    return job.name + CONFIG_SUFFIX


def ssh_secret_name(job: MPIJob) -> str:
    return job.name + SSH_AUTH_SECRET_SUFFIX


def launcher_name(job: MPIJob) -> str:
    """The launcher Job, and the hostname of its pod."""
    return job.name + LAUNCHER_SUFFIX


def pod_group_name(job: MPIJob) -> str:
    return job.name


PDB_SUFFIX: Final = "-workers"


def pdb_name(job: MPIJob) -> str:
    """The workers' PodDisruptionBudget (`desired.pdb`); not `<job>`, the name a user who made one
    by hand before the operator did most likely gave it (it would stand in the way)."""
    return job.name + PDB_SUFFIX


def worker_name(job: MPIJob, index: int) -> str:
    return f"{job.name}{WORKER_SUFFIX}-{index}"


def worker_index(job: MPIJob, pod_name: str) -> int | None:
    """`i` for a pod named `<job>-worker-<i>` (canonical decimal, no leading zeros), else None."""
    prefix = f"{job.name}{WORKER_SUFFIX}-"
    if not pod_name.startswith(prefix):
        return None
    digits = pod_name[len(prefix) :]
    return int(digits) if _WORKER_INDEX.match(digits) else None


def app_labels(job: MPIJob) -> dict[str, str]:
    """`{app: <job>}`: upstream's labels on the Service, ConfigMap, Secret and launcher Job."""
    return {LABEL_APP: job.name}


def default_labels(job: MPIJob, role: str) -> dict[str, str]:
    """Upstream `defaultLabels(job, role)`: operator name, job name and role."""
    return {
        c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME,
        c.LABEL_JOB_NAME: job.name,
        c.LABEL_JOB_ROLE: role,
    }


def legacy_labels(job: MPIJob, role: str) -> dict[str, str]:
    """The labels of the earlier controllers that recipes and tools still select on: v1alpha2's
    `mpi_job_name` / `mpi_role_type`, v1's `mpi-job-name` / `mpi-job-role`, and the Kubeflow
    training SDK's `training.kubeflow.org/replica-type` (`get_job_pods(replica_type=...)`,
    lower-case)."""
    return {
        c.LEGACY_LABEL_JOB_NAME: job.name,
        c.LEGACY_LABEL_ROLE_TYPE: role,
        c.V1_LABEL_JOB_NAME: job.name,
        c.V1_LABEL_ROLE_TYPE: role,
        c.LABEL_REPLICA_TYPE: role,
    }


def pod_labels(job: MPIJob, role: str) -> dict[str, str]:
    """Every label the operator puts on a pod of `role` (before the replica index and gang
    labels)."""
    return {**default_labels(job, role), **legacy_labels(job, role)}


def service_selector(job: MPIJob) -> dict[str, str]:
    """Upstream's Service selector: operator and job name, so it matches the launcher and the
    workers."""
    return {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job.name}


def worker_selector(job: MPIJob) -> dict[str, str]:
    """The labels every worker pod of the job carries (upstream `workerSelector`)."""
    return default_labels(job, c.ROLE_WORKER)


def has_worker_labels(job: MPIJob, labels: Mapping[str, Any]) -> bool:
    """`labels` include `worker_selector(job)`; without building it, as this runs for every pod of
    every sync."""
    return (
        labels.get(c.LABEL_JOB_NAME) == job.name
        and labels.get(c.LABEL_JOB_ROLE) == c.ROLE_WORKER
        and labels.get(c.LABEL_OPERATOR_NAME) == c.OPERATOR_NAME
    )


def worker_replica_index(job: MPIJob, index: int) -> str:
    """The `replica-index` label of worker `index`: shifted by one when the launcher is rank 0's
    host."""
    return str(index + 1 if job.spec.run_launcher_as_worker else index)


def owner_reference(job: MPIJob) -> KubeObject:
    """`metav1.NewControllerRef(job, kubeflow.org/v2beta1 MPIJob)`."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_controlled_by(obj: Mapping[str, Any], job: MPIJob) -> bool:
    """Whether `obj`'s controller reference points at this MPIJob (by uid, as
    `metav1.IsControlledBy`)."""
    return objects.is_controlled_by(obj, job.uid)


def owned_object(job: MPIJob, api_version: str, kind: str, name: str, **fields: Any) -> KubeObject:
    """A child labelled `app: <job>` and controlled by the job, with `fields` (spec, data...) after
    its metadata: the shape of the Service, ConfigMap, Secret and launcher Job."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": object_meta(job, name, app_labels(job)),
        **fields,
    }


def object_meta(job: MPIJob, name: str, labels: dict[str, str]) -> KubeObject:
    """Metadata of a namespaced child: name, the job's namespace, labels and the controller
    reference."""
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": dict(labels),
        "ownerReferences": [owner_reference(job)],
    }


def service_domain(job: MPIJob, cluster_domain: str = "") -> str:
    """`<job>.<ns>.svc`, plus `.<cluster_domain>` when one is configured (upstream's FQDN rule)."""
    domain = f"{service_name(job)}.{job.namespace}.svc"
    return f"{domain}.{cluster_domain}" if cluster_domain else domain


def host_fqdn(job: MPIJob, hostname: str, cluster_domain: str = "") -> str:
    """`<hostname>.<job>.<ns>.svc[.<cluster_domain>]`: how MPI and Horovod reach a pod."""
    return f"{hostname}.{service_domain(job, cluster_domain)}"


def worker_fqdn(job: MPIJob, index: int, cluster_domain: str = "") -> str:
    return host_fqdn(job, worker_name(job, index), cluster_domain)


def launcher_fqdn(job: MPIJob, cluster_domain: str = "") -> str:
    return host_fqdn(job, launcher_name(job), cluster_domain)


def dns_search_domain(job: MPIJob, cluster_domain: str = "") -> str:
    """The workers' extra DNS search path `<job>.<ns>.svc.<domain>`.

    Upstream hard-codes `cluster.local`, which is wrong on a cluster with another domain; we honour
    the configured one.
    """
    return f"{service_name(job)}.{job.namespace}.svc.{cluster_domain or DEFAULT_CLUSTER_DOMAIN}"
