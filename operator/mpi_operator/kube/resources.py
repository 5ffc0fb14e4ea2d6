"""The REST resources the operator reads or writes (what `kubectl api-resources` lists), and how
their URLs are built (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from mpi_operator.api import constants


@dataclass(frozen=True)
class Resource:
    """One REST resource: `group` is "" for the core API."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def is_custom(self) -> bool:
        """Served from a CRD, so strategic merge patch is not available (415)."""
        return self.group in _CUSTOM_GROUPS

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """`/api/v1/namespaces/ns/pods/name/status` and friends; no namespace means across all of
        them."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif not self.namespaced and namespace:
            raise ValueError(f"{self.kind} is cluster-scoped; got namespace {namespace!r}")
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        elif subresource:
            raise ValueError("a subresource needs an object name")
        return base


MPIJOB = Resource(constants.GROUP, constants.VERSION, constants.PLURAL, True, constants.KIND)
POD = Resource("", "v1", "pods", True, "Pod")
SERVICE = Resource("", "v1", "services", True, "Service")
CONFIG_MAP = Resource("", "v1", "configmaps", True, "ConfigMap")
SECRET = Resource("", "v1", "secrets", True, "Secret")
EVENT = Resource("", "v1", "events", True, "Event")
NAMESPACE = Resource("", "v1", "namespaces", False, "Namespace")
JOB = Resource("batch", "v1", "jobs", True, "Job")
POD_DISRUPTION_BUDGET = Resource(
    "policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget"
)
LEASE = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
VOLCANO_POD_GROUP = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", True, "PodGroup")
SCHEDULER_PLUGINS_POD_GROUP = Resource(
    "scheduling.x-k8s.io", "v1alpha1", "podgroups", True, "PodGroup"
)

_CUSTOM_GROUPS = frozenset(
    {constants.GROUP, VOLCANO_POD_GROUP.group, SCHEDULER_PLUGINS_POD_GROUP.group}
)
