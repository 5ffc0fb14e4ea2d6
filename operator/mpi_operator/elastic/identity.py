"""Host identity of a worker pod incarnation: the blacklist-safe naming of elastic workers.

Horovod keys everything on the exact string the discovery script prints (`reference/horovod-elastic.md`
A9) and blacklists the host name of a failed worker for the rest of the job when `horovodrun` runs without
`--blacklist-cooldown-range` (A8, upstream's default). A replacement listed under the same name is silently
ignored forever, which is how the Kubeflow operator's stable `<job>-worker-<i>` hostnames lose workers.

Design: **a fresh host identity per pod incarnation**. The pod *name* stays `<job>-worker-<i>` (labels,
`kubectl` recipes, planning by name are all unchanged); the pod's `spec.hostname`, and therefore its DNS
name `<hostname>.<job>.<ns>.svc[.<domain>]` and the string `discover_hosts.sh` prints, is
`worker_hostname(job, i, n)`: exactly upstream's `<job>-worker-<i>` for incarnation 0 and
`<job>-worker-<i>-r<n>` for the n-th later pod of the same index. The incarnation counter of each index
lives in the API (the elastic state annotation on the ConfigMap, `state.py`, and the annotation
`INCARNATION_ANNOTATION` on the pod), and an identity that Horovod may have seen is never given to a
second pod: every pod of index i that fails, is evicted, is deleted or is deleted after a graceful
scale-in retires its identity, so the next pod of that index starts under n + 1.

Why not the alternatives:
- pod IPs: change per pod too, but an IP of a dead pod can be reassigned to a later pod of the same job
  (then blacklisted), Horovod cannot use IPv6 literals (A2), and ssh/MPI users expect names;
- an operator-arranged cooldown (`--blacklist-cooldown-range`): needs the user's horovodrun flags, makes a
  replacement wait 2L..3L seconds (growing exponentially with repeated failures, capped at an hour), and
  the operator cannot add flags to a user's command line reliably.

Trade-offs of the chosen design:
- ssh `known_hosts`: a new name never meets a stale host key for the same name (Horovod's ssh uses
  `StrictHostKeyChecking=no` anyway); a user-managed known_hosts gets one entry per incarnation;
- static MPI: static jobs never bump incarnations (replacement is elastic-only), so their hostfile and
  names stay upstream's byte for byte; an elastic job's static `hostfile` names incarnation 0 until the
  desired builders pass the incarnations (see the report);
- DNS: the new name resolves once the headless Service publishes the Ready pod (publishNotReadyAddresses
  is false); discovery lists a pod only when Ready, so the record exists then, modulo DNS caching;
- upstream compatibility: incarnation 0 is upstream's hostname, pod names never change; only replaced or
  re-created workers of elastic jobs carry the `-r<n>` suffix;
- length: a hostname is a DNS-1035 label (≤ 63); when the suffix would not fit, the base is shortened and
  a short hash of it keeps identities distinct.
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
    """The annotation a worker pod of that incarnation carries (none for incarnation 0: upstream's pod)."""
    return {INCARNATION_ANNOTATION: str(incarnation)} if incarnation else {}


def pod_incarnation(job: MPIJob, index: int, pod: Mapping[str, Any]) -> int:
    """Which incarnation an observed worker pod is: its annotation, else its hostname's suffix, else 0."""
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
