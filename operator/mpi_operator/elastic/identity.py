"""Host identity of a worker pod incarnation: the blacklist-safe naming of elastic workers.

Horovod blacklists a failed worker's host name for the rest of the job, so every pod incarnation
gets a fresh one. The pod *name* stays `<job>-worker-<i>`; its `spec.hostname` (its DNS name and
script line) is `worker_hostname(job, i, n)`: upstream's name for incarnation 0, `-r<n>` after it,
shortened with a hash to fit a DNS-1035 label. Each index's counter lives in the API (`state.py`,
`INCARNATION_ANNOTATION`). Why not pod IPs or a cooldown:
docs/architecture.md#the-elastic-state-machine.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.desired import naming

INCARNATION_ANNOTATION: Final = "mpi-operator.kubeflow.org/incarnation"
"""On a worker pod: which incarnation of its index the pod is (absent = 0)."""
INCARNATION_SUFFIX: Final = "-r"
_HASH_LENGTH: Final = 6
_SUFFIX = re.compile(r"-r([1-9][0-9]*)$")


def worker_hostname(job: MPIJob, index: int, incarnation: int = 0) -> str:
    """`spec.hostname` of worker `index`'s pod in its `incarnation`-th life (0: upstream's name)."""
    if index < 0 or incarnation < 0:
        raise ValueError(f"index and incarnation must be non-negative, got {index}, {incarnation}")
    base = naming.worker_name(job, index)
    if incarnation == 0:
        return base
    suffix = f"{INCARNATION_SUFFIX}{incarnation}"
    if len(base) + len(suffix) <= c.DNS1035_LABEL_MAX_LENGTH:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:_HASH_LENGTH]
    keep = c.DNS1035_LABEL_MAX_LENGTH - len(suffix) - _HASH_LENGTH - 1
    return f"{base[:keep].rstrip('-')}-{digest}{suffix}"


def worker_host(job: MPIJob, index: int, incarnation: int = 0, cluster_domain: str = "") -> str:
    """The FQDN `discover_hosts.sh` prints for that incarnation."""
    return naming.host_fqdn(job, worker_hostname(job, index, incarnation), cluster_domain)


def incarnation_annotations(incarnation: int) -> dict[str, str]:
    """The annotation a worker pod of that incarnation carries (none for incarnation 0: upstream's
    pod)."""
    return {INCARNATION_ANNOTATION: str(incarnation)} if incarnation else {}


def pod_incarnation(job: MPIJob, index: int, pod: Mapping[str, Any]) -> int:
    """Which incarnation an observed worker pod is: its annotation, else its hostname's suffix, else
    0."""
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(INCARNATION_ANNOTATION) if isinstance(annotations, Mapping) else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    spec = pod.get("spec")
    hostname = spec.get("hostname") if isinstance(spec, Mapping) else None
    if isinstance(hostname, str) and hostname != naming.worker_name(job, index):
        match = _SUFFIX.search(hostname)
        if match is not None:
            return int(match.group(1))
    return 0


def parse_worker_host(job: MPIJob, host: str, cluster_domain: str = "") -> tuple[int, int] | None:
    """`(index, incarnation)` of a host name `worker_host` gave, None for any other name.

    Shortened names (jobs whose names leave no room for the suffix) cannot be parsed back; the index
    is not in them.
    """
    domain = "." + naming.service_domain(job, cluster_domain)
    if not host.endswith(domain):
        return None
    match = re.fullmatch(
        re.escape(naming.worker_name(job, 0)[:-1]) + r"(0|[1-9][0-9]*)(?:-r([1-9][0-9]*))?",
        host[: -len(domain)],
    )
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)
