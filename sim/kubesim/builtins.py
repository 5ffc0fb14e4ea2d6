"""The built-in resource types kubesim serves (the kinds an operator and kubectl touch).

Built-in objects are stored generically; their behaviour (pod binding and graceful deletion,
namespace lifecycle, CRD registration) lives in `kubesim.cluster`, and their validation in
`kubesim.admission`.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from kubesim.registry import ResourceType, ScaleSubresource

_READ_ONLY_SUB = ("get", "patch", "update")


def _rt(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    status: bool = False,
    subresources: tuple[str, ...] = (),
    verbs: tuple[str, ...] | None = None,
) -> ResourceType:
    rt = ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        builtin=True,
        short_names=short_names,
        categories=categories,
        status_subresource=status,
        subresources=subresources,
    )
    if verbs is not None:
        return dataclasses.replace(rt, verbs=verbs)
    return rt


NAMESPACES = _rt(
    "",
    "v1",
    "Namespace",
    "namespaces",
    namespaced=False,
    short_names=("ns",),
    status=True,
    subresources=("finalize",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
)
PODS = _rt(
    "",
    "v1",
    "Pod",
    "pods",
    short_names=("po",),
    categories=("all",),
    status=True,
    subresources=("eviction", "binding"),
)
SERVICES = _rt(
    "", "v1", "Service", "services", short_names=("svc",), categories=("all",), status=True
)
CONFIGMAPS = _rt("", "v1", "ConfigMap", "configmaps", short_names=("cm",))
SECRETS = _rt("", "v1", "Secret", "secrets")
SERVICEACCOUNTS = _rt("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",))
EVENTS = _rt("", "v1", "Event", "events", short_names=("ev",))
NODES = _rt("", "v1", "Node", "nodes", namespaced=False, short_names=("no",), status=True)
JOBS = _rt("batch", "v1", "Job", "jobs", categories=("all",), status=True)
# Deployments are stored (so `kubectl apply -k deploy/` of the operator itself works) but no
# controller turns them into pods.
DEPLOYMENTS = dataclasses.replace(
    _rt(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        short_names=("deploy",),
        categories=("all",),
        status=True,
    ),
    scale=ScaleSubresource(".spec.replicas", ".status.replicas"),
)
LEASES = _rt("coordination.k8s.io", "v1", "Lease", "leases")
EVENTS_V1 = _rt("events.k8s.io", "v1", "Event", "events", short_names=("ev",))
ROLES = _rt("rbac.authorization.k8s.io", "v1", "Role", "roles")
ROLEBINDINGS = _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
CLUSTERROLES = _rt(
    "rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False
)
CLUSTERROLEBINDINGS = _rt(
    "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False
)
PRIORITY_CLASSES = _rt(
    "scheduling.k8s.io",
    "v1",
    "PriorityClass",
    "priorityclasses",
    namespaced=False,
    short_names=("pc",),
)
PDBS = _rt(
    "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",), status=True
)
CRDS = _rt(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    status=True,
)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    NAMESPACES,
    PODS,
    SERVICES,
    CONFIGMAPS,
    SECRETS,
    SERVICEACCOUNTS,
    EVENTS,
    NODES,
    JOBS,
    DEPLOYMENTS,
    LEASES,
    EVENTS_V1,
    ROLES,
    ROLEBINDINGS,
    CLUSTERROLES,
    CLUSTERROLEBINDINGS,
    PRIORITY_CLASSES,
    PDBS,
    CRDS,
)

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_CRITICAL = "Used for system critical pods that must "
INITIAL_PRIORITY_CLASSES: tuple[dict[str, Any], ...] = tuple(
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": _CRITICAL + description,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    for name, value, description in (
        (
            "system-cluster-critical",
            2000000000,
            "run in the cluster, but can be moved to another node if necessary.",
        ),
        ("system-node-critical", 2000001000, "not be moved from their current node."),
    )
)
"""The classes every cluster's API server creates at start (the scheduling bootstrap)."""
UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
DEFAULT_GRACE_SECONDS = 30
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def is_type(rt: ResourceType, ref: ResourceType) -> bool:
    return rt.group == ref.group and rt.plural == ref.plural


def prepare_create(rt: ResourceType, obj: dict[str, Any], *, node_name: str, now: datetime) -> None:
    """What the apiserver's create strategies (and the scheduler, for pods) do to a new object, in
    place."""
    if is_type(rt, PODS):
        # `node_name`: the default cluster binds a pod that fits its one node as it is created.
        spec = obj.setdefault("spec", {})
        if node_name:
            spec.setdefault("nodeName", node_name)
        obj["status"] = {"phase": "Pending"}
        if spec.get("nodeName"):
            obj["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": now.strftime(TIMESTAMP_FORMAT),
                }
            ]
    elif is_type(rt, NAMESPACES):
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif is_type(rt, CRDS):
        obj["status"] = crd_status(obj, now)
    elif is_type(rt, NODES):
        pass  # nodes register themselves with their status
    elif rt.status_subresource:
        # Status is written through /status only; a create never sets it (jobs get an empty one).
        obj.pop("status", None)
        if is_type(rt, JOBS) or is_type(rt, SERVICES) or is_type(rt, DEPLOYMENTS):
            obj["status"] = {}
        elif is_type(rt, PDBS):  # policy/v1's counts are not omitempty
            obj["status"] = dict.fromkeys(
                ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"), 0
            )


def prepare_update(
    rt: ResourceType, current: dict[str, Any], new: dict[str, Any], subresource: str | None
) -> dict[str, Any]:
    """The object an update stores, as the kind's update strategy builds it from `current` and
    `new`.

    `/status` changes only `.status`; `namespaces/finalize` only `spec.finalizers`; the main
    endpoint keeps the current status when the kind has a status subresource, and a namespace's
    spec.finalizers. `current` must be a private copy of the top level (nested values are shared
    with the stored object and left alone); it may be returned modified.
    """
    if subresource == "status":
        if "status" in new:
            current["status"] = new["status"]
        else:
            current.pop("status", None)
        return current
    if subresource == "binding":
        return new  # Cluster.bind built it from the stored pod
    if subresource == "finalize":
        finalizers = list((new.get("spec") or {}).get("finalizers") or [])
        current["spec"] = {**(current.get("spec") or {}), "finalizers": finalizers}
        return current
    if rt.status_subresource:
        if "status" in current:
            new["status"] = current["status"]
        else:
            new.pop("status", None)
    if is_type(rt, NAMESPACES):
        new.setdefault("spec", {})["finalizers"] = list(
            (current.get("spec") or {}).get("finalizers") or []
        )
    return new


def spec_changed(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether `metadata.generation` must grow: anything outside metadata (and status, when it is a
    subresource) changed."""
    skipped = {"metadata", "apiVersion", "kind", *(("status",) if rt.status_subresource else ())}
    keys = (set(old) | set(new)) - skipped
    return any(old.get(k) != new.get(k) for k in keys)


def deletion_complete(rt: ResourceType, obj: dict[str, Any]) -> bool:
    """True when an object being deleted has nothing left holding it: no finalizers, no grace
    period."""
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    if int(meta.get("deletionGracePeriodSeconds") or 0):
        return False
    return not (is_type(rt, NAMESPACES) and (obj.get("spec") or {}).get("finalizers"))


POLICY_FINALIZERS = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}
"""The finalizer a DeleteOptions.propagationPolicy puts on the object (the garbage collector acts on
it)."""


def mark_deleting(
    rt: ResourceType, obj: dict[str, Any], finalizers: list[str], at: datetime, grace: int
) -> None:
    """Sets what a graceful or finalizer-held deletion sets, in place (a namespace also turns
    Terminating)."""
    meta = obj["metadata"]
    if finalizers:
        meta["finalizers"] = finalizers
    if not meta.get("deletionTimestamp"):
        meta["generation"] = int(meta.get("generation") or 0) + 1
    meta["deletionTimestamp"] = at.strftime(TIMESTAMP_FORMAT)
    meta["deletionGracePeriodSeconds"] = grace
    if is_type(rt, NAMESPACES):
        obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}


def crd_status(crd: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The status the apiextensions controllers give an accepted CRD: names accepted,
    established."""
    spec = crd.get("spec") or {}
    stamp = now.strftime(TIMESTAMP_FORMAT)
    storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    return {
        "acceptedNames": dict(spec.get("names") or {}),
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": stamp,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": stamp,
            },
        ],
        "storedVersions": storage,
    }


def crd_problems(crd: dict[str, Any]) -> list[dict[str, str]]:
    """Field errors the apiserver reports for a CRD kubesim could not serve (name, group, storage
    version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    problems: list[dict[str, str]] = []
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    name = (crd.get("metadata") or {}).get("name", "")
    if name != expected:
        problems.append(
            {
                "field": "metadata.name",
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            }
        )
    if not names.get("kind") or not names.get("plural"):
        problems.append(
            {"field": "spec.names", "reason": "FieldValueRequired", "message": "Required value"}
        )
    storage = [v for v in spec.get("versions") or [] if v.get("storage")]
    if len(storage) != 1:
        problems.append(
            {
                "field": "spec.versions",
                "reason": "FieldValueInvalid",
                "message": "Invalid value: must have exactly one version marked as storage version",
            }
        )
    return problems


def pod_grace_seconds(pod: dict[str, Any], requested: int | None) -> int:
    """The grace period of a pod deletion: 0 for unbound or finished pods, as the pod strategy
    decides."""
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(0, requested)
    configured = spec.get("terminationGracePeriodSeconds")
    return int(configured) if isinstance(configured, int) else DEFAULT_GRACE_SECONDS


JOB_ORPHAN_WARNING = (
    "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
    "to remove "
    "them or set propagationPolicy=Orphan to suppress this warning"
)


def allows_unconditional_update(rt: ResourceType) -> bool:
    """Whether a PUT without metadata.resourceVersion is accepted (the strategies'
    AllowUnconditionalUpdate): true for the built-in kinds here except CRDs, false for custom
    resources."""
    return rt.builtin and not is_type(rt, CRDS)


def default_propagation(rt: ResourceType) -> str | None:
    """batch/v1 Jobs still default to orphaning their pods when a client sends no
    propagationPolicy."""
    return "Orphan" if is_type(rt, JOBS) else None
