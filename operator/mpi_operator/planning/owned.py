"""The fields of each child this operator owns, compared and rewritten one kind at a time.

A full-object diff never converges, because the API server adds defaults (`clusterIPs`,
`sessionAffinity`, `dnsPolicy`, the Job's generated selector, ...). Each function here compares only
what upstream compares and, when that differs, returns a copy of the *observed* object with just
those fields replaced, which is what upstream sends in its Update (the observed resourceVersion
makes it a compare-and-swap).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.desired import secret as ssh_secret
from mpi_operator.objects import KubeObject
from mpi_operator.planning.actions import Update

POD_GROUP_SPEC_FIELDS: Final = (
    "minMember",
    "queue",
    "priorityClassName",
    "minResources",
    "scheduleTimeoutSeconds",
)
"""PodGroup spec fields the builder may set; any other spec field is the gang scheduler's."""
_SERVER_DEFAULTED_POD_GROUP_FIELDS: Final = frozenset({"queue"})
"""Volcano's admission webhook fills an empty queue with `default`; unset on our side means "don't
care"."""

SCHEDULING_DIRECTIVES: Final = ("nodeSelector", "tolerations", "schedulingGates")
"""Pod template fields of a suspended Job that may change before it starts (KEP-2926; Kueue sets
them)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _for_write(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> KubeObject:
    """A deep copy of the observed object, with apiVersion/kind (absent from LIST items) filled
    in."""
    obj: KubeObject = copy.deepcopy(dict(observed))
    obj["apiVersion"] = desired.get("apiVersion", obj.get("apiVersion"))
    obj["kind"] = desired.get("kind", obj.get("kind"))
    return obj


def service_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update | None:
    """Selector and publishNotReadyAddresses; ports, clusterIP(s) and the rest are the server's."""
    have, want = _mapping(observed.get("spec")), _mapping(desired.get("spec"))
    fields = []
    # Semantic.DeepEqual: a nil map equals an empty one.
    if dict(_mapping(have.get("selector"))) != dict(_mapping(want.get("selector"))):
        fields.append("spec.selector")
    if bool(have.get("publishNotReadyAddresses")) != bool(want.get("publishNotReadyAddresses")):
        fields.append("spec.publishNotReadyAddresses")
    if not fields:
        return None
    obj = _for_write(observed, desired)
    spec = obj.setdefault("spec", {})
    spec["selector"] = dict(_mapping(want.get("selector")))
    if want.get("publishNotReadyAddresses"):
        spec["publishNotReadyAddresses"] = True
    else:
        spec.pop("publishNotReadyAddresses", None)
    return Update.of(obj, *fields)


def config_map_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update | None:
    """The whole `data` is replaced when it differs (keys someone else added are dropped, as
    upstream).

    Annotations the desired ConfigMap carries (an elastic job's published state, written together
    with the script it describes) are set too; other annotations are left alone. Static jobs carry
    none.
    """
    want = dict(_mapping(desired.get("data")))
    have_annotations = _mapping(_mapping(observed.get("metadata")).get("annotations"))
    want_annotations = dict(_mapping(_mapping(desired.get("metadata")).get("annotations")))
    fields = []
    if dict(_mapping(observed.get("data"))) != want:
        fields.append("data")
    if any(have_annotations.get(key) != value for key, value in want_annotations.items()):
        fields.append("metadata.annotations")
    if not fields:
        return None
    obj = _for_write(observed, desired)
    obj["data"] = want
    if want_annotations:
        metadata = obj.setdefault("metadata", {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **want_annotations}
    return Update.of(obj, *fields)


def secret_needs_keys(observed: Mapping[str, Any] | None) -> bool:
    """Whether the Secret must be (re)written, which needs a freshly generated key pair.

    Only the *set* of keys is compared, never the values (upstream), so an existing Secret with both
    keys is left alone and no key pair is generated for it.
    """
    return observed is None or not ssh_secret.has_expected_keys(observed)


def secret_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update | None:
    if not secret_needs_keys(observed):
        return None
    obj = _for_write(observed, desired)
    obj["data"] = dict(_mapping(desired.get("data")))
    return Update.of(obj, "data")


PDB_SPEC_FIELDS: Final = ("minAvailable", "selector", "unhealthyPodEvictionPolicy")
"""The budget's spec is ours whole: `maxUnavailable` is never set (the API refuses both)."""


def pdb_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update | None:
    """The spec fields the builder sets, replaced when one differs (a `minReplicas` edit)."""
    have, want = _mapping(observed.get("spec")), _mapping(desired.get("spec"))
    fields = [f"spec.{key}" for key in PDB_SPEC_FIELDS if have.get(key) != want.get(key)]
    if "maxUnavailable" in have:
        fields.append("spec.maxUnavailable")
    if not fields:
        return None
    obj = _for_write(observed, desired)
    obj["spec"] = copy.deepcopy(dict(want))
    return Update.of(obj, *fields)


def pod_group_update(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update | None:
    """The spec is replaced when one of the fields we set differs (upstream `pgSpecsAreEqual`)."""
    have, want = _mapping(observed.get("spec")), _mapping(desired.get("spec"))
    fields = []
    for key in dict.fromkeys([*want, *POD_GROUP_SPEC_FIELDS]):
        if key not in want and key in _SERVER_DEFAULTED_POD_GROUP_FIELDS:
            continue
        if _normalized(have.get(key)) != _normalized(want.get(key)):
            fields.append(f"spec.{key}")
    if not fields:
        return None
    obj = _for_write(observed, desired)
    spec = dict(_mapping(obj.get("spec")))
    for key in POD_GROUP_SPEC_FIELDS:
        spec.pop(key, None)
    spec.update(copy.deepcopy(dict(want)))
    obj["spec"] = spec
    return Update.of(obj, *fields)


def _normalized(value: Any) -> Any:
    """Empty and absent are the same to Go's omitempty; quantities compare as the strings we
    send."""
    if value in (None, {}, [], ""):
        return None
    if isinstance(value, Mapping):
        return {k: str(v) if isinstance(v, int | float) else v for k, v in value.items()}
    return value


def suspend_launcher(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> Update:
    """The launcher Job with `spec.suspend: true` (its pods are then deleted by the Job
    controller)."""
    obj = _for_write(observed, desired)
    obj.setdefault("spec", {})["suspend"] = True
    return Update.of(obj, "spec.suspend")


def clear_launcher_start_time(observed: Mapping[str, Any]) -> KubeObject | None:
    """A copy of the launcher Job without `status.startTime`, or None when it has none.

    The Job's pod template is immutable once startTime is set, so resuming clears it first (upstream
    #772), through the status subresource.
    """
    status = _mapping(observed.get("status"))
    if status.get("startTime") is None:
        return None
    obj: KubeObject = copy.deepcopy(dict(observed))
    obj.setdefault("apiVersion", "batch/v1")
    obj.setdefault("kind", "Job")
    del obj["status"]["startTime"]
    return obj


def resume_launcher(
    observed: Mapping[str, Any], desired: Mapping[str, Any], *, after_previous_write: bool
) -> Update:
    """`spec.suspend: false` plus upstream's `syncLauncherSchedulingDirectives`.

    Template labels and annotations become the observed ones overlaid with ours; nodeSelector,
    tolerations and schedulingGates are replaced by the MPIJob's (that is how Kueue places the job).
    """
    obj = _for_write(observed, desired)
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    meta = template.setdefault("metadata", {})
    want_template = _mapping(_mapping(desired.get("spec")).get("template"))
    want_meta = _mapping(want_template.get("metadata"))
    for key in ("labels", "annotations"):
        merged = {**_mapping(meta.get(key)), **_mapping(want_meta.get(key))}
        if merged:
            meta[key] = merged
    pod_spec = template.setdefault("spec", {})
    want_pod_spec = _mapping(want_template.get("spec"))
    for key in SCHEDULING_DIRECTIVES:
        if key in want_pod_spec:
            pod_spec[key] = copy.deepcopy(want_pod_spec[key])
        else:
            pod_spec.pop(key, None)
    spec["suspend"] = False
    return Update.of(
        obj, "spec.suspend", "spec.template", after_previous_write=after_previous_write
    )
