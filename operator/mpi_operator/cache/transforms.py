"""What an informer keeps of each object: client-go's `SetTransform`, declared per resource.

The stores are most of the operator's memory, so a transform returns what a store keeps instead of
what the server sent. `metadata.managedFields` goes from everything (no reader uses it, and an
Update built without it leaves the server's as they are). Only kinds never sent back may lose more:
pods are created, patched and deleted, never updated, so they keep metadata and the spec and status
fields the operator reads; Jobs, Services, ConfigMaps, Secrets and PodGroups lose only
managedFields. Repeated label, annotation and owner strings are interned. A transform never mutates
its input (stores are read-only, see `cache.store`): it copies the dicts on the paths it changes.
`tests/unit/cache/test_transforms.py` states, table-driven, what each transform strips and keeps.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from mpi_operator.objects import KubeObject

Transform = Callable[[KubeObject], KubeObject]

POD_SPEC_KEPT: Final = frozenset({"hostname", "subdomain"})
"""No sync reads `nodeName`: kept, the scheduler's binding of every pod was an update that mattered
(a sync per pod for nothing); a placed pod is told by its PodScheduled condition going."""
POD_STATUS_KEPT: Final = frozenset(
    {"phase", "conditions", "reason", "message", "startTime", "containerStatuses"}
)
CONTAINER_STATUS_KEPT: Final = frozenset(
    {"name", "ready", "started", "restartCount", "state", "lastState"}
)
POD_CONDITIONS_KEPT: Final = frozenset({"Ready", "DisruptionTarget"})
"""Ready for discovery; DisruptionTarget tells a worker the cluster took from a failed one."""
POD_CONDITIONS_KEPT_UNLESS_TRUE: Final = frozenset({"PodScheduled"})
"""Read only while False (why a worker waits: `status.pending`); a placed pod drops it."""
METADATA_DROPPED: Final = frozenset({"managedFields"})


def _interned(value: Any) -> Any:
    """A flat string map (labels, annotations) with its keys and values interned; anything else as
    is."""
    if not isinstance(value, Mapping):
        return value
    return {
        sys.intern(k) if isinstance(k, str) else k: sys.intern(v) if isinstance(v, str) else v
        for k, v in value.items()
    }


def _metadata(meta: Any) -> Any:
    """The metadata without managedFields; labels, annotations and owner references interned."""
    if not isinstance(meta, Mapping):
        return meta
    out = {key: value for key, value in meta.items() if key not in METADATA_DROPPED}
    for key in ("labels", "annotations"):
        if key in out:
            out[key] = _interned(out[key])
    if isinstance(out.get("namespace"), str):
        out["namespace"] = sys.intern(out["namespace"])
    refs = out.get("ownerReferences")
    if isinstance(refs, list):
        # The owner's apiVersion, kind, name and uid repeat in each of a job's pods.
        out["ownerReferences"] = [_interned(ref) for ref in refs]
    return out


def _only(value: Any, kept: frozenset[str]) -> Any:
    if not isinstance(value, Mapping):
        return value
    return {k: v for k, v in value.items() if k in kept}


def strip_managed_fields(obj: KubeObject) -> KubeObject:
    """Every kind: the object without `metadata.managedFields` (labels and annotations interned)."""
    if not isinstance(obj.get("metadata"), Mapping):
        return obj
    return {**obj, "metadata": _metadata(obj["metadata"])}


def pod(obj: KubeObject) -> KubeObject:
    """A pod as the operator reads it (see the module docstring); never sent back to the server."""
    out: KubeObject = dict(obj)
    if "metadata" in out:
        out["metadata"] = _metadata(out["metadata"])
    if "spec" in out:
        out["spec"] = _only(out["spec"], POD_SPEC_KEPT)
    status = _only(out.get("status"), POD_STATUS_KEPT)
    if isinstance(status, dict):
        conditions = status.get("conditions")
        if isinstance(conditions, list):
            status["conditions"] = [
                c
                for c in conditions
                if isinstance(c, Mapping)
                and (
                    c.get("type") in POD_CONDITIONS_KEPT
                    or (
                        c.get("type") in POD_CONDITIONS_KEPT_UNLESS_TRUE
                        and c.get("status") != "True"
                    )
                )
            ]
        statuses = status.get("containerStatuses")
        if isinstance(statuses, list):
            status["containerStatuses"] = [_only(cs, CONTAINER_STATUS_KEPT) for cs in statuses]
        out["status"] = status
    return out


BY_RESOURCE: Final[Mapping[str, Transform]] = {"pods": pod}
"""The transforms stricter than `strip_managed_fields`, by resource (plural, core group)."""


def for_resource(group: str, plural: str) -> Transform:
    """The transform of a resource's informer: the entry of `BY_RESOURCE`, else
    `strip_managed_fields`."""
    if group == "":
        return BY_RESOURCE.get(plural, strip_managed_fields)
    return strip_managed_fields
