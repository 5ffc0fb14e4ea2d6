"""Validation of built-in kinds beyond their schema: object metadata and each kind's `Validate*`
rules.

Runs after decoding and defaulting, like the apiserver's strategies. Paths and wording follow
`pkg/apis/{core,batch,rbac,coordination}/validation` and apimachinery's `ValidateObjectMeta`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from typing import Any

from kubesim import names
from kubesim.admission import priority
from kubesim.admission.defaults import CONTROLLER_UID_LABEL, JOB_NAME_LABEL
from kubesim.admission.fielderrors import FieldErrors
from kubesim.admission.podspec import PROTOCOLS, validate_label, validate_pod_spec
from kubesim.selectors import Operator, Requirement

MAX_DATA_SIZE = 1024 * 1024
_STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")
_RBAC_GROUP = "rbac.authorization.k8s.io"


def validate_metadata(kind: str, meta: dict[str, Any], errs: FieldErrors) -> None:
    rule = names.name_rule(kind)
    if meta.get("generateName"):
        for msg in rule(names.mask_trailing_dash(meta["generateName"])):
            errs.invalid("metadata.generateName", meta["generateName"], msg)
    name = meta.get("name", "")
    if not name:
        errs.required("metadata.name", "name or generateName is required")
    else:
        for msg in rule(name):
            errs.invalid("metadata.name", name, msg)
    for key, value in (meta.get("labels") or {}).items():
        validate_label(key, value, "metadata.labels", errs)
    annotations = meta.get("annotations") or {}
    for key in annotations:
        for msg in names.is_qualified_name(key.lower()):
            errs.invalid("metadata.annotations", key, msg)
    if sum(len(k) + len(v) for k, v in annotations.items()) > names.TOTAL_ANNOTATION_SIZE:
        errs.too_long("metadata.annotations", names.TOTAL_ANNOTATION_SIZE)
    controllers = 0
    for ref in meta.get("ownerReferences") or []:
        api_version = ref.get("apiVersion", "")
        if not api_version.rpartition("/")[2]:
            errs.invalid(
                "metadata.ownerReferences.apiVersion", api_version, "version must not be empty"
            )
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.invalid(
                    f"metadata.ownerReferences.{key}", ref.get(key, ""), "must not be empty"
                )
        controllers += bool(ref.get("controller"))
    if controllers > 1:
        errs.invalid(
            "metadata.ownerReferences",
            meta["ownerReferences"],
            "Only one reference can have Controller set to true",
        )
    for finalizer in meta.get("finalizers") or []:
        for msg in names.is_qualified_name(finalizer):
            errs.invalid("metadata.finalizers", finalizer, msg)
        if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            errs.invalid(
                "metadata.finalizers",
                finalizer,
                "name is neither a standard finalizer name nor is it fully qualified",
            )


def _service(obj: dict[str, Any], errs: FieldErrors) -> None:
    spec = obj.get("spec") or {}
    svc_type = spec.get("type", "")
    types = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
    if svc_type not in types:
        errs.not_supported("spec.type", svc_type, types)
    affinity = spec.get("sessionAffinity", "")
    if affinity not in ("ClientIP", "None"):
        errs.not_supported("spec.sessionAffinity", affinity, ("ClientIP", "None"))
    ports = spec.get("ports") or []
    if not ports and svc_type != "ExternalName" and spec.get("clusterIP") != "None":
        errs.required("spec.ports")
    seen_names: set[str] = set()
    seen_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        p = f"spec.ports[{i}]"
        pname = port.get("name", "")
        if not pname and len(ports) > 1:
            errs.required(f"{p}.name")
        elif pname:
            for msg in names.is_dns1123_label(pname):
                errs.invalid(f"{p}.name", pname, msg)
            if pname in seen_names:
                errs.duplicate(f"{p}.name", pname)
            seen_names.add(pname)
        number = port.get("port", 0)
        if not 1 <= number <= 65535:
            errs.invalid(f"{p}.port", number, "must be between 1 and 65535, inclusive")
        protocol = port.get("protocol", "")
        if protocol not in PROTOCOLS:
            errs.not_supported(f"{p}.protocol", protocol, PROTOCOLS)
        target = port.get("targetPort", 0)
        if isinstance(target, int) and not 1 <= target <= 65535:
            errs.invalid(f"{p}.targetPort", target, "must be between 1 and 65535, inclusive")
        elif isinstance(target, str):
            for msg in names.is_valid_port_name(target):
                errs.invalid(f"{p}.targetPort", target, msg)
        if (number, protocol) in seen_ports:
            errs.duplicate(p, port)
        seen_ports.add((number, protocol))
    for key, value in (spec.get("selector") or {}).items():
        validate_label(key, value, "spec.selector", errs)
    for i, ip in enumerate(spec.get("clusterIPs") or []):
        if ip == "None" and i == 0:
            continue
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            errs.invalid(
                f"spec.clusterIPs[{i}]",
                ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )


def _data_keys(obj: dict[str, Any], errs: FieldErrors, *, decoded: bool) -> int:
    size = 0
    data = obj.get("data") or {}
    for key, value in data.items():
        for msg in names.is_config_map_key(key):
            errs.invalid(f"data[{key}]", key, msg)
        size += len(_decoded(value)) if decoded else len(value)
    for key, value in (obj.get("binaryData") or {}).items():
        for msg in names.is_config_map_key(key):
            errs.invalid(f"binaryData[{key}]", key, msg)
        if key in data:
            errs.invalid(f"binaryData[{key}]", key, "duplicate of key present in data")
        size += len(_decoded(value))
    if size > MAX_DATA_SIZE:
        errs.too_long("", MAX_DATA_SIZE)
    return size


def _decoded(value: str) -> bytes:
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return value.encode()


def _config_map(obj: dict[str, Any], errs: FieldErrors) -> None:
    _data_keys(obj, errs, decoded=False)


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
}


def _secret(obj: dict[str, Any], errs: FieldErrors) -> None:
    _data_keys(obj, errs, decoded=True)
    data = obj.get("data") or {}
    for key in _SECRET_REQUIRED_KEYS.get(obj.get("type", ""), ()):
        if key not in data:
            errs.required(f"data[{key}]")
    if obj.get("type") == "kubernetes.io/service-account-token":
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if not annotations.get("kubernetes.io/service-account.name"):
            errs.required("metadata.annotations[kubernetes.io/service-account.name]")


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches(labels)."""
    reqs = [
        Requirement(k, Operator.EQUALS, frozenset({v}))
        for k, v in (selector.get("matchLabels") or {}).items()
    ]
    ops = {
        "In": Operator.IN,
        "NotIn": Operator.NOT_IN,
        "Exists": Operator.EXISTS,
        "DoesNotExist": Operator.DOES_NOT_EXIST,
    }
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is not None:
            reqs.append(Requirement(expr.get("key", ""), op, frozenset(expr.get("values") or ())))
    return all(r.matches(labels) for r in reqs)


def _label_selector(selector: dict[str, Any], path: str, errs: FieldErrors) -> None:
    for key, value in (selector.get("matchLabels") or {}).items():
        validate_label(key, value, f"{path}.matchLabels", errs)
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op, values = expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            errs.required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist") and values:
            errs.forbidden(
                f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.invalid(f"{p}.operator", op, "not a valid selector operator")


def _nonnegative(spec: dict[str, Any], keys: tuple[str, ...], path: str, errs: FieldErrors) -> None:
    for key in keys:
        value = spec.get(key)
        if value is not None and value < 0:
            errs.invalid(f"{path}.{key}", value, "must be greater than or equal to 0")


def _job(obj: dict[str, Any], errs: FieldErrors) -> None:
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    _nonnegative(
        spec,
        ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"),
        "spec",
        errs,
    )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and deadline <= 0:
        errs.invalid("spec.activeDeadlineSeconds", deadline, "must be greater than 0")
    mode = spec.get("completionMode", "")
    if mode not in ("NonIndexed", "Indexed"):
        errs.not_supported("spec.completionMode", mode, ("NonIndexed", "Indexed"))
    elif mode == "Indexed" and spec.get("completions") is None:
        errs.required("spec.completions", "when completion mode is Indexed")
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        errs.required("spec.selector")
    else:
        _label_selector(selector, "spec.selector", errs)
        if not selector_matches(selector, labels):
            errs.invalid(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            )
        if not spec.get("manualSelector"):
            uid = str(meta.get("uid") or "")
            if not uid:
                errs.required("metadata.uid")
            for key, want in (
                (CONTROLLER_UID_LABEL, uid),
                (JOB_NAME_LABEL, str(meta.get("name") or "")),
            ):
                if labels.get(key) != want:
                    errs.invalid(
                        f"spec.template.metadata.labels[{key}]", labels, f"must be '{want}'"
                    )
            if not selector_matches(selector, {CONTROLLER_UID_LABEL: uid}):
                errs.invalid("spec.selector", selector, "`selector` not auto-generated")
    if not template:
        errs.required("spec.template")
        return
    for key, value in labels.items():
        validate_label(key, value, "spec.template.labels", errs)
    pod_spec = template.get("spec") or {}
    validate_pod_spec(pod_spec, "spec.template.spec", errs)
    policy = pod_spec.get("restartPolicy", "")
    if policy not in ("OnFailure", "Never"):
        errs.not_supported("spec.template.spec.restartPolicy", policy, ("OnFailure", "Never"))


def _lease(obj: dict[str, Any], errs: FieldErrors) -> None:
    spec = obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
    _nonnegative(spec, ("leaseTransitions",), "spec", errs)


def _event(obj: dict[str, Any], errs: FieldErrors) -> None:
    namespace = (obj.get("metadata") or {}).get("namespace", "")
    new_api = obj.get("apiVersion") == "events.k8s.io/v1"
    ref_key = "regarding" if new_api else "involvedObject"
    ref_ns = (obj.get(ref_key) or {}).get("namespace", "")
    new_style = new_api or bool(obj.get("eventTime"))
    # an event about a cluster-scoped object lives in the default (or, for new events, kube-system)
    # namespace
    allowed = ("", "default", "kube-system") if new_style else ("", "default")
    if (ref_ns and ref_ns != namespace) or (not ref_ns and namespace not in allowed):
        errs.invalid(f"{ref_key}.namespace", ref_ns, "does not match event.namespace")
    if not new_api and not obj.get("eventTime"):
        return
    if not obj.get("eventTime"):
        errs.required("eventTime")
    if new_api and obj.get("type") not in ("Normal", "Warning"):
        errs.invalid("type", "", f"has invalid value: {obj.get('type', '')}")
    controller_key = "reportingController" if new_api else "reportingComponent"
    for key, limit in (
        (controller_key, 0),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ):
        value = obj.get(key, "")
        if not value:
            errs.required(key)
        elif limit and len(value) > limit:
            errs.invalid(key, "", f"can have at most {limit} characters")
    controller = obj.get(controller_key, "")
    if controller:
        for msg in names.is_qualified_name(controller):
            errs.invalid(controller_key, controller, msg)


def _policy_rules(obj: dict[str, Any], errs: FieldErrors, *, namespaced: bool) -> None:
    for i, rule in enumerate(obj.get("rules") or []):
        p = f"rules[{i}]"
        if not rule.get("verbs"):
            errs.required(f"{p}.verbs", "verbs must contain at least one value")
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                errs.invalid(
                    f"{p}.nonResourceURLs",
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                )
            if rule.get("apiGroups") or rule.get("resources"):
                errs.invalid(
                    f"{p}.nonResourceURLs",
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            continue
        if not rule.get("apiGroups"):
            errs.required(f"{p}.apiGroups", "resource rules must supply at least one api group")
        if not rule.get("resources"):
            errs.required(f"{p}.resources", "resource rules must supply at least one resource")


def _binding(obj: dict[str, Any], errs: FieldErrors, *, namespaced: bool) -> None:
    ref = obj.get("roleRef") or {}
    if ref.get("apiGroup") != _RBAC_GROUP:
        errs.not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), (_RBAC_GROUP,))
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if ref.get("kind") not in kinds:
        errs.not_supported("roleRef.kind", ref.get("kind", ""), kinds)
    if not ref.get("name"):
        errs.required("roleRef.name")
    else:
        for msg in names.is_valid_path_segment_name(ref["name"]):
            errs.invalid("roleRef.name", ref["name"], msg)
    for i, subject in enumerate(obj.get("subjects") or []):
        p = f"subjects[{i}]"
        if not subject.get("name"):
            errs.required(f"{p}.name")
        kind, group = subject.get("kind", ""), subject.get("apiGroup", "")
        if kind == "ServiceAccount":
            if group:
                errs.not_supported(f"{p}.apiGroup", group, ("",))
            if not namespaced and not subject.get("namespace"):
                errs.required(f"{p}.namespace")
        elif kind in ("User", "Group"):
            if group != _RBAC_GROUP:
                errs.not_supported(f"{p}.apiGroup", group, (_RBAC_GROUP,))
        else:
            errs.not_supported(f"{p}.kind", kind, ("ServiceAccount", "User", "Group"))


def _namespace(obj: dict[str, Any], errs: FieldErrors) -> None:
    for finalizer in (obj.get("spec") or {}).get("finalizers") or []:
        for msg in names.is_qualified_name(finalizer):
            errs.invalid("spec.finalizers", finalizer, msg)


def _pod(obj: dict[str, Any], errs: FieldErrors) -> None:
    validate_pod_spec(obj.get("spec") or {}, "spec", errs)


_PERCENT = re.compile(r"[0-9]+%")
_PERCENT_ERROR = names.regex_error(
    "a valid percent string must be a numeric string followed by an ending '%'",
    "[0-9]+%",
    "1%",
    "93%",
)
_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def _positive_int_or_percent(value: Any, path: str, errs: FieldErrors) -> None:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent (`pkg/apis/apps/validation`)."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            errs.invalid(path, value, _PERCENT_ERROR)
        elif int(value[:-1]) > 100:
            errs.invalid(path, value, "must not be greater than 100%")
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            errs.invalid(path, value, "must be greater than or equal to 0")
    else:
        errs.invalid(path, value, "must be an integer or percentage (e.g '5%')")


def _pod_disruption_budget(obj: dict[str, Any], errs: FieldErrors) -> None:
    """ValidatePodDisruptionBudgetSpec (`pkg/apis/policy/validation`)."""
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            _positive_int_or_percent(spec[key], f"spec.{key}", errs)
    if isinstance(spec.get("selector"), dict):
        _label_selector(spec["selector"], "spec.selector", errs)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errs.not_supported(
            "spec.unhealthyPodEvictionPolicy", policy, _UNHEALTHY_POD_EVICTION_POLICIES
        )


def _priority_class(obj: dict[str, Any], errs: FieldErrors) -> None:
    """ValidatePriorityClass (`pkg/apis/scheduling/validation`): `system-` names are reserved."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    value = obj.get("value")
    if name.startswith(priority.SYSTEM_PREFIX):
        known = priority.SYSTEM_CLASSES.get(name)
        if known is None:
            why = f"{name} is not a known system priority class"
        elif value != known:
            why = f"value of {name} PriorityClass must be {known}"
        elif obj.get("globalDefault"):
            why = f"globalDefault of {name} PriorityClass must be false"
        else:
            return
        errs.forbidden(
            "metadata.name",
            f"priority class names with '{priority.SYSTEM_PREFIX}' prefix are reserved for system "
            "use "
            f"only. error: {why}",
        )
    elif isinstance(value, int) and value > priority.HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.forbidden(
            "value",
            "maximum allowed value of a user defined priority is "
            f"{priority.HIGHEST_USER_DEFINABLE_PRIORITY}",
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
        errs.not_supported("preemptionPolicy", policy, ("Never", "PreemptLowerPriority"))


KIND_RULES: dict[str, Callable[[dict[str, Any], FieldErrors], None]] = {
    "Pod": _pod,
    "Service": _service,
    "ConfigMap": _config_map,
    "Secret": _secret,
    "Job": _job,
    "Lease": _lease,
    "Event": _event,
    "Role": lambda o, e: _policy_rules(o, e, namespaced=True),
    "ClusterRole": lambda o, e: _policy_rules(o, e, namespaced=False),
    "RoleBinding": lambda o, e: _binding(o, e, namespaced=True),
    "ClusterRoleBinding": lambda o, e: _binding(o, e, namespaced=False),
    "Namespace": _namespace,
    "PodDisruptionBudget": _pod_disruption_budget,
    "PriorityClass": _priority_class,
}


def validate_builtin(kind: str, obj: dict[str, Any], errs: FieldErrors) -> None:
    validate_metadata(kind, obj.get("metadata") or {}, errs)
    rule = KIND_RULES.get(kind)
    if rule is not None:
        rule(obj, errs)
