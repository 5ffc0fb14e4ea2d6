"""What an informer keeps of each object: client-go's `SetTransform`, declared per resource.

A store holds every object of its resource for as long as it exists, so what it keeps is most of the
operator's memory: at 1,000 jobs x 8 workers, 9,000 pods. A transform runs on every object before it
is stored (list items and watch events alike) and returns what the store keeps instead.

Two rules decide what may go:
  * `metadata.managedFields` goes from everything. No reader looks at it, and it is often the biggest
    part of an object. An Update (PUT) built from a cached object without it leaves the server's
    managedFields as they are (an absent list is not an empty one).
  * A kind may lose more only if the operator never sends the cached object back. Pods are such a
    kind: they are created, merge-patched (annotations) and deleted, never updated, so a cached pod
    keeps its metadata, the few spec fields read (`hostname` for the elastic incarnation,
    `subdomain`, `nodeName`) and the status fields read (phase, the Ready condition, reason,
    message, startTime, and per container its name, readiness, restarts and states). Everything else of the
    spec (containers, env, volumes: the bulk of a pod) is what the operator itself wrote from the
    MPIJob's template, which it reads from the MPIJob, never from the pod. Jobs, Services, ConfigMaps,
    Secrets and PodGroups may be updated from the cache, so they lose only managedFields.

Label and annotation keys and values, owner references and namespaces, the strings that repeat most
across objects, are interned, so 9,000 pods share one copy of `training.kubeflow.org/job-role`
instead of holding 9,000.
A transform is a handful of dict copies per object, no deep walk (it runs on every watch event). It
never mutates its input: it builds new dicts along the paths it changes and shares the rest (objects
in a store are read-only, see `cache.store`).

`tests/unit/cache/test_transforms.py` states, table-driven, what each transform strips and
keeps; the reconcile and elastic integration tiers run with these transforms on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from mpi_operator.objects import KubeObject

Transform = Callable[[KubeObject], KubeObject]

POD_SPEC_KEPT: Final = frozenset({"hostname", "subdomain", "nodeName"})
POD_STATUS_KEPT: Final = frozenset(
    {"phase", "conditions", "reason", "message", "startTime", "containerStatuses"}
)
CONTAINER_STATUS_KEPT: Final = frozenset({"name", "ready", "started", "restartCount", "state", "lastState"})
POD_CONDITIONS_KEPT: Final = frozenset({"Ready"})
METADATA_DROPPED: Final = frozenset({"managedFields"})


def _interned(value: Any) -> Any:
    """A flat string map (labels, annotations) with its keys and values interned; anything else as is."""
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
                c for c in conditions if isinstance(c, Mapping) and c.get("type") in POD_CONDITIONS_KEPT
            ]
        statuses = status.get("containerStatuses")
        if isinstance(statuses, list):
            status["containerStatuses"] = [_only(cs, CONTAINER_STATUS_KEPT) for cs in statuses]
        out["status"] = status
    return out


BY_RESOURCE: Final[Mapping[str, Transform]] = {"pods": pod}
"""The transforms stricter than `strip_managed_fields`, by resource (plural, core group)."""


def for_resource(group: str, plural: str) -> Transform:
    """The transform of a resource's informer: the entry of `BY_RESOURCE`, else `strip_managed_fields`."""
    if group == "":
        return BY_RESOURCE.get(plural, strip_managed_fields)
    return strip_managed_fields
