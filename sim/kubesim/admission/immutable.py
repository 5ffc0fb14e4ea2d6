"""Update rules of built-in kinds: which fields an UPDATE (PUT or PATCH) may change.

Follows `ValidatePodUpdate`, `ValidateJobSpecUpdate`, `ValidateConfigMapUpdate`,
`ValidateSecretUpdate`, `ValidateServiceUpdate`, `ValidateRoleBindingUpdate` and the CRD update
strategy. Both objects are the decoded and defaulted forms, so defaults never count as a change.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.admission.fielderrors import FieldErrors

POD_UPDATABLE_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)


def _diff(old: Any, new: Any, path: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff(old.get(key), new.get(key), f"{path}.{key}", out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{path}[{i}]", out)
    elif old != new:
        out.append(
            f"-  {path}: {json.dumps(old, sort_keys=True)}\n+  {path}: "
            f"{json.dumps(new, sort_keys=True)}"
        )


def _pod(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    munged = copy.deepcopy(spec)
    for key in ("containers", "initContainers"):
        new_list, old_list = munged.get(key) or [], old_spec.get(key) or []
        if len(new_list) == len(old_list):
            for n, o in zip(new_list, old_list, strict=True):
                if "image" in o:
                    n["image"] = o["image"]
    new_deadline, old_deadline = (
        spec.get("activeDeadlineSeconds"),
        old_spec.get("activeDeadlineSeconds"),
    )
    if old_deadline is not None:
        if new_deadline is None:
            errs.invalid(
                "spec.activeDeadlineSeconds",
                None,
                "must not update from a positive integer to nil value",
            )
        elif new_deadline > old_deadline:
            errs.invalid(
                "spec.activeDeadlineSeconds",
                new_deadline,
                "must be less than or equal to previous value",
            )
    _restore(munged, old_spec, "activeDeadlineSeconds")
    old_tolerations = old_spec.get("tolerations") or []
    if all(t in (spec.get("tolerations") or []) for t in old_tolerations):
        _restore(munged, old_spec, "tolerations")
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and spec.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, old_spec, "terminationGracePeriodSeconds")
    gates = spec.get("schedulingGates") or []
    if all(g in (old_spec.get("schedulingGates") or []) for g in gates):
        _restore(munged, old_spec, "schedulingGates")  # gates may only be removed
    _restore(munged, old_spec, "ephemeralContainers")  # changed only through /ephemeralcontainers
    if munged != old_spec:
        changes: list[str] = []
        _diff(old_spec, munged, "spec", changes)
        errs.forbidden(
            "spec",
            f"pod updates may not change fields other than {','.join(POD_UPDATABLE_FIELDS)}\n"
            + "\n".join(changes),
        )


def _restore(target: dict[str, Any], source: dict[str, Any], key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


_SCHEDULING_DIRECTIVES = ("nodeSelector", "affinity", "tolerations", "schedulingGates")


def _job(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    for key in (
        "selector",
        "completions",
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
    ):
        if key == "completions" and _elastic_indexed(spec, old_spec):
            continue
        if spec.get(key) != old_spec.get(key):
            errs.invalid(f"spec.{key}", spec.get(key), "field is immutable")
    template = copy.deepcopy(spec.get("template") or {})
    old_template = old_spec.get("template") or {}
    never_started = old_spec.get("suspend") and not (old.get("status") or {}).get("startTime")
    if never_started:
        # a suspended job that never ran may get new scheduling directives
        # (MutableSchedulingDirectives)
        for key in ("labels", "annotations"):
            _restore(template.setdefault("metadata", {}), old_template.get("metadata") or {}, key)
        for key in _SCHEDULING_DIRECTIVES:
            _restore(template.setdefault("spec", {}), old_template.get("spec") or {}, key)
        if not template["metadata"] and "metadata" not in old_template:
            template.pop("metadata")
    if template != old_template:
        errs.invalid("spec.template", spec.get("template") or {}, "field is immutable")


def _elastic_indexed(spec: dict[str, Any], old_spec: dict[str, Any]) -> bool:
    """ElasticIndexedJob: an Indexed job may change completions together with parallelism."""
    return (
        spec.get("completionMode") == "Indexed"
        and old_spec.get("completionMode") == "Indexed"
        and spec.get("completions") == spec.get("parallelism")
        and old_spec.get("completions") == old_spec.get("parallelism")
    )


def _immutable_data(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    if not old.get("immutable"):
        return
    if not new.get("immutable"):
        errs.forbidden("immutable", "field is immutable when `immutable` is set")
    for key in ("data", "binaryData"):
        if (new.get(key) or {}) != (old.get(key) or {}):
            errs.forbidden(key, "field is immutable when `immutable` is set")


def _secret(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    if new.get("type") != old.get("type"):
        errs.invalid("type", new.get("type", ""), "field is immutable")
    _immutable_data(new, old, errs)


def _service(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if "ExternalName" in (spec.get("type"), old_spec.get("type")):
        return
    new_ips, old_ips = spec.get("clusterIPs") or [], old_spec.get("clusterIPs") or []
    if old_ips and new_ips and new_ips[0] != old_ips[0]:
        errs.invalid("spec.clusterIPs[0]", new_ips, "may not change once set")


def _role_binding(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    ref = new.get("roleRef") or {}
    if ref != (old.get("roleRef") or {}):
        # the internal rbac.RoleRef has no json tags: its Go field names show
        shown = {
            "APIGroup": ref.get("apiGroup", ""),
            "Kind": ref.get("kind", ""),
            "Name": ref.get("name", ""),
        }
        errs.invalid("roleRef", shown, "cannot change roleRef")


def _crd(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    for key in ("group", "scope"):
        if spec.get(key) != old_spec.get(key):
            errs.invalid(f"spec.{key}", spec.get(key, ""), "field is immutable")
    plural = (spec.get("names") or {}).get("plural")
    if plural != (old_spec.get("names") or {}).get("plural"):
        errs.invalid("spec.names.plural", plural or "", "field is immutable")


def _priority_class(new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    """ValidatePriorityClassUpdate: `value` and `preemptionPolicy` are immutable."""
    if new.get("value") != old.get("value"):
        errs.forbidden("value", "may not be changed in an update.")
    if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
        errs.invalid("preemptionPolicy", new.get("preemptionPolicy"), "field is immutable")


UPDATE_RULES = {
    "Pod": _pod,
    "Job": _job,
    "ConfigMap": _immutable_data,
    "Secret": _secret,
    "Service": _service,
    "RoleBinding": _role_binding,
    "ClusterRoleBinding": _role_binding,
    "CustomResourceDefinition": _crd,
    "PriorityClass": _priority_class,
}


def validate_update(kind: str, new: dict[str, Any], old: dict[str, Any], errs: FieldErrors) -> None:
    rule = UPDATE_RULES.get(kind)
    if rule is not None:
        rule(new, old, errs)
