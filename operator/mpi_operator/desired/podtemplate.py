"""What the worker pods and the launcher's pod template share: template copying and pod-level defaults.

Builders start from a deep copy of the replica's template (the pydantic models are frozen, but nested
dicts are not, and the template may come from a cached object), so no builder ever mutates its input.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.api.models import ReplicaSpec
from mpi_operator.desired.naming import KubeObject

CLUSTER_FIRST_WITH_HOST_NET: Final = "ClusterFirstWithHostNet"


def copy_template(spec: ReplicaSpec) -> KubeObject:
    """A deep copy of the replica's pod template with `metadata`, `spec` and `spec.containers` present."""
    template: KubeObject = copy.deepcopy(dict(spec.template))
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


def set_pod_identity(pod_spec: KubeObject, hostname: str, subdomain: str) -> None:
    """Hostname and subdomain (the headless Service), and host-network DNS that still resolves them."""
    pod_spec["hostname"] = hostname
    pod_spec["subdomain"] = subdomain
    if pod_spec.get("hostNetwork"):
        pod_spec["dnsPolicy"] = CLUSTER_FIRST_WITH_HOST_NET


def append_env(container: KubeObject, env: list[KubeObject]) -> None:
    """Upstream appends: user env first, so the operator's value wins for a duplicate name."""
    container["env"] = [*(container.get("env") or []), *env]
