"""What the worker pods and the launcher's pod template share: template copying and pod-level
defaults (identity, DNS, the job's PriorityClass).

Builders start from a deep copy of the replica's template (the pydantic models are frozen, but
nested dicts are not, and the template may come from a cached object), so no builder ever mutates
its input.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.api.models import MPIJob, ReplicaSpec
from mpi_operator.objects import KubeObject

CLUSTER_FIRST_WITH_HOST_NET: Final = "ClusterFirstWithHostNet"


def _json_copy(value: Any) -> Any:
    """`copy.deepcopy` of JSON data, several times faster: dicts and lists copied, scalars shared
    (they are immutable); anything else is left to deepcopy. Every worker pod built copies its
    template."""
    kind = type(value)
    if kind is dict:
        return {key: _json_copy(item) for key, item in value.items()}
    if kind is list:
        return [_json_copy(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


def copy_template(spec: ReplicaSpec) -> KubeObject:
    """A deep copy of the replica's pod template with `metadata`, `spec` and `spec.containers`
    present."""
    template: KubeObject = _json_copy(dict(spec.template))
    if not isinstance(template.get("metadata"), dict):
        template["metadata"] = {}
    if not isinstance(template.get("spec"), dict):
        template["spec"] = {}
    pod_spec = template["spec"]
    if not isinstance(pod_spec.get("containers"), list) or not pod_spec["containers"]:
        pod_spec["containers"] = [{}]
    return template


def merged(base: Any, overlay: Mapping[str, str]) -> dict[str, str]:
    """`base` (a template's labels or annotations, possibly absent) overlaid with `overlay`."""
    return {**(base if isinstance(base, Mapping) else {}), **overlay}


def set_pod_identity(
    pod_spec: KubeObject, hostname: str, subdomain: str, search_domain: str
) -> None:
    """Hostname and subdomain (the headless Service), host-network DNS that still resolves them, and
    the Service's domain appended to the DNS search path, so that the job's short host names
    resolve.

    Upstream gives the search path to the workers only (Intel MPI's and MPICH's proxies dial the
    launcher by its short name). The launcher needs it as much: upstream's MPICH and Intel images
    look up `$HOSTNAME` from the launcher before starting and, without it, retry for about 100 s on
    every job.
    """
    pod_spec["hostname"] = hostname
    pod_spec["subdomain"] = subdomain
    if pod_spec.get("hostNetwork"):
        pod_spec["dnsPolicy"] = CLUSTER_FIRST_WITH_HOST_NET
    found = pod_spec.get("dnsConfig")
    dns_config: KubeObject = found if isinstance(found, dict) else {}
    dns_config["searches"] = [*(dns_config.get("searches") or []), search_domain]
    pod_spec["dnsConfig"] = dns_config


def append_env(container: KubeObject, env: list[KubeObject]) -> None:
    """Upstream appends: user env first, so the operator's value wins for a duplicate name."""
    container["env"] = [*(container.get("env") or []), *env]


def set_priority_class(pod_spec: KubeObject, job: MPIJob) -> None:
    """`schedulingPolicy.priorityClass` on a pod whose template names no class of its own, so the
    scheduler ranks and preempts the job's pods by it (upstream gives it to the PodGroup only)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class and not pod_spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = policy.priority_class
