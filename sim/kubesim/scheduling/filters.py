"""kube-scheduler's default Filter plugins that a simulated cluster exercises, in the profile's
order: NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required node affinity),
NodeResourcesFit. A node fails on the first plugin that rejects it (`Failure`), as the scheduler
stops there; `resolvable` says whether removing pods could help (the preemption hint). Sources:
pkg/scheduler/framework/plugins/{nodeunschedulable,tainttoleration,nodeaffinity,noderesources},
k8s.io/component-helpers/scheduling/corev1 (tolerations, node selectors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.scheduling import resources as res
from kubesim.scheduling.resources import Resources

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_NATIVE = (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE)


@dataclass
class NodeInfo:
    """A node as the scheduler sees it: its object's fields and the requests of the non-terminal
    pods bound to it (kept up to date by the caller)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    unschedulable: bool = False
    allocatable: Resources = field(default_factory=dict)
    unlimited: bool = False
    requested: Resources = field(default_factory=dict)
    """Sum of the bound pods' requests."""
    scored: Resources = field(default_factory=dict)
    """Sum of the bound pods' requests as scoring counts them (`pod_requests(nonzero=True)`)."""
    pods: int = 0


def node_info(node: Mapping[str, Any], *, unlimited: bool = False) -> NodeInfo:
    """A NodeInfo with nothing bound yet, from a Node object."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    return NodeInfo(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        taints=list(spec.get("taints") or ()),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=res.resource_list((node.get("status") or {}).get("allocatable")),
        unlimited=unlimited,
    )


@dataclass(frozen=True)
class Failure:
    reasons: tuple[str, ...]
    resolvable: bool
    """Unschedulable (preemption might help) rather than UnschedulableAndUnresolvable."""


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(
    tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first NoSchedule or NoExecute taint no toleration tolerates (PreferNoSchedule only
    scores)."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    operator = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    """One nodeSelectorTerm: all its expressions and fields hold; an empty term matches nothing."""
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    for expr in expressions:
        if not _expression_matches(expr, labels.get(str(expr.get("key", "")))):
            return False
    for expr in fields:
        # metadata.name is the one field a node selector may name.
        value = name if expr.get("key") == "metadata.name" else None
        if not _expression_matches(expr, value):
            return False
    return True


def matches_node_affinity(spec: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    """nodeSelector (every label equal) and the required node affinity's terms (any one holds)."""
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity is None:
        return True
    return any(term_matches(t, name, labels) for t in affinity.get("nodeSelectorTerms") or ())


def insufficient(requests: Mapping[str, int], node: NodeInfo) -> list[str]:
    """NodeResourcesFit's reasons, in its order: pods, cpu, memory, ephemeral-storage, the rest."""
    reasons: list[str] = []
    if node.pods + 1 > node.allocatable.get(res.PODS, 0):
        reasons.append(TOO_MANY_PODS)
    others = sorted(name for name in requests if name not in _NATIVE)
    for name in (*_NATIVE, *others):
        wanted = requests.get(name, 0)
        if wanted > 0 and wanted > node.allocatable.get(name, 0) - node.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def filter_node(
    spec: Mapping[str, Any], requests: Mapping[str, int], node: NodeInfo
) -> Failure | None:
    """None when the pod fits `node`, else why not (the first plugin that rejects it)."""
    tolerations = spec.get("tolerations") or ()
    if node.unschedulable and not any(
        tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
    ):
        return Failure((UNSCHEDULABLE,), resolvable=False)
    taint = untolerated_taint(tolerations, node.taints)
    if taint is not None:
        reason = (
            f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"
        )
        return Failure((reason,), resolvable=False)
    if node.unlimited:
        # The default cluster's one node stands for room for every pod, in whatever pool it asks
        # for: a shaped cluster (`--nodes`, `--cluster`) is where selectors decide placement.
        return None
    if not matches_node_affinity(spec, node.name, node.labels):
        return Failure((AFFINITY_MISMATCH,), resolvable=False)
    reasons = insufficient(requests, node)
    if reasons:
        return Failure(tuple(reasons), resolvable=True)
    return None


def placement_failure(spec: Mapping[str, Any], node: Mapping[str, Any]) -> Failure | None:
    """The filters other than resources, on a Node object as stored: what binding a pod to the
    default cluster's unlimited node at admission checks (cheap: no NodeInfo is built)."""
    meta = node.get("metadata") or {}
    node_spec = node.get("spec") or {}
    info = NodeInfo(
        name=str(meta.get("name", "")),
        labels=meta.get("labels") or {},
        taints=node_spec.get("taints") or (),
        unschedulable=bool(node_spec.get("unschedulable")),
        unlimited=True,
    )
    return filter_node(spec, {}, info)
