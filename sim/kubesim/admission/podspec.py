"""Pod spec validation (`ValidatePodSpec` and what it calls), for pods and for pod templates.

Runs on the decoded, defaulted object, so fields the decoder already type-checked are trusted here.
Messages and paths follow `pkg/apis/core/validation`.
"""

from __future__ import annotations

import re
from typing import Any

from kubesim import names
from kubesim.admission.fielderrors import FieldErrors
from kubesim.admission.quantity import QuantityError, parse_quantity

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List(supportedPortProtocols): sorted
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
)
_FIELD_REF_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
_FIELD_REF_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['[^']*'\]$")
_ENV_NAME_MSG = (
    "a valid environment variable name must consist only of printable ASCII "
    "characters other than '='"
)
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def validate_pod_spec(spec: dict[str, Any], path: str, errs: FieldErrors) -> None:
    volumes = _validate_volumes(spec.get("volumes") or [], f"{path}.volumes", errs)
    seen: set[str] = set()
    if not spec.get("containers"):
        errs.required(f"{path}.containers")
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            _validate_container(c, f"{path}.{key}[{i}]", volumes, seen, errs)
    policy = spec.get("restartPolicy", "")
    if policy == "":
        errs.required(f"{path}.restartPolicy")
    elif policy not in RESTART_POLICIES:
        errs.not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES)
    dns = spec.get("dnsPolicy", "")
    if dns and dns not in DNS_POLICIES:
        errs.not_supported(f"{path}.dnsPolicy", dns, DNS_POLICIES)
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            for msg in names.is_dns1123_label(spec[key]):
                errs.invalid(f"{path}.{key}", spec[key], msg)
    if spec.get("serviceAccountName"):
        for msg in names.is_dns1123_subdomain(spec["serviceAccountName"]):
            errs.invalid(f"{path}.serviceAccountName", spec["serviceAccountName"], msg)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        errs.invalid(
            f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive"
        )
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and grace < 0:
        errs.invalid(
            f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"
        )
    for key, value in (spec.get("nodeSelector") or {}).items():
        validate_label(key, value, f"{path}.nodeSelector", errs)
    for i, t in enumerate(spec.get("tolerations") or []):
        _validate_toleration(t, f"{path}.tolerations[{i}]", errs)


def validate_label(key: str, value: str, path: str, errs: FieldErrors) -> None:
    for msg in names.is_qualified_name(key):
        errs.invalid(path, key, msg)
    for msg in names.is_valid_label_value(value):
        errs.invalid(path, value, msg)


def _validate_volumes(volumes: list[dict[str, Any]], path: str, errs: FieldErrors) -> set[str]:
    seen: set[str] = set()
    for i, v in enumerate(volumes):
        p = f"{path}[{i}]"
        name = v.get("name", "")
        if not name:
            errs.required(f"{p}.name")
        else:
            for msg in names.is_dns1123_label(name):
                errs.invalid(f"{p}.name", name, msg)
            if name in seen:
                errs.duplicate(f"{p}.name", name)
            seen.add(name)
        sources = [s for s in _VOLUME_SOURCES if s in v]
        if not sources:
            errs.required(p, "must specify a volume type")
        elif len(sources) > 1:
            errs.forbidden(f"{p}.{sources[1]}", "may not specify more than 1 volume type")
        for source in ("configMap", "secret"):
            src = v.get(source)
            if not isinstance(src, dict):
                continue
            ref = "name" if source == "configMap" else "secretName"
            if not src.get(ref):
                errs.required(f"{p}.{source}.{ref}")
            mode = src.get("defaultMode")
            if mode is not None and not 0 <= mode <= 0o777:
                errs.invalid(f"{p}.{source}.defaultMode", mode, _MODE_MSG)
            for j, item in enumerate(src.get("items") or []):
                _validate_key_to_path(item, f"{p}.{source}.items[{j}]", errs)
    return seen


_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"


def _validate_key_to_path(item: dict[str, Any], path: str, errs: FieldErrors) -> None:
    if not item.get("key"):
        errs.required(f"{path}.key")
    target = item.get("path", "")
    if not target:
        errs.required(f"{path}.path")
    else:
        _validate_local_path(target, f"{path}.path", errs)
    mode = item.get("mode")
    if mode is not None and not 0 <= mode <= 0o777:
        errs.invalid(f"{path}.mode", mode, _MODE_MSG)


def _validate_local_path(target: str, path: str, errs: FieldErrors) -> None:
    if target.startswith("/"):
        errs.invalid(path, target, "must be a relative path")
    if ".." in target.split("/"):
        errs.invalid(path, target, "must not contain '..'")


def _validate_container(
    c: dict[str, Any], path: str, volumes: set[str], seen: set[str], errs: FieldErrors
) -> None:
    name = c.get("name", "")
    if not name:
        errs.required(f"{path}.name")
    else:
        for msg in names.is_dns1123_label(name):
            errs.invalid(f"{path}.name", name, msg)
        if name in seen:
            errs.duplicate(f"{path}.name", name)
        seen.add(name)
    if not c.get("image"):
        errs.required(f"{path}.image")
    for key, allowed in (
        ("imagePullPolicy", PULL_POLICIES),
        ("terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES),
    ):
        value = c.get(key, "")
        if value == "":
            errs.required(f"{path}.{key}")
        elif value not in allowed:
            errs.not_supported(f"{path}.{key}", value, allowed)
    port_names: set[str] = set()
    for i, port in enumerate(c.get("ports") or []):
        _validate_container_port(port, f"{path}.ports[{i}]", port_names, errs)
    for i, env in enumerate(c.get("env") or []):
        _validate_env(env, f"{path}.env[{i}]", errs)
    mount_paths: set[str] = set()
    for i, mount in enumerate(c.get("volumeMounts") or []):
        p = f"{path}.volumeMounts[{i}]"
        mname = mount.get("name", "")
        if not mname:
            errs.required(f"{p}.name")
        elif mname not in volumes:
            errs.not_found(f"{p}.name", mname)
        mpath = mount.get("mountPath", "")
        if not mpath:
            errs.required(f"{p}.mountPath")
        elif mpath in mount_paths:
            errs.invalid(f"{p}.mountPath", mpath, "must be unique")
        mount_paths.add(mpath)
        if mount.get("subPath"):
            _validate_local_path(mount["subPath"], f"{p}.subPath", errs)
    _validate_resources(c.get("resources") or {}, f"{path}.resources", errs)


def _validate_container_port(
    port: dict[str, Any], path: str, seen: set[str], errs: FieldErrors
) -> None:
    if port.get("name"):
        for msg in names.is_valid_port_name(port["name"]):
            errs.invalid(f"{path}.name", port["name"], msg)
        if port["name"] in seen:
            errs.duplicate(f"{path}.name", port["name"])
        seen.add(port["name"])
    number = port.get("containerPort", 0)
    if number == 0:
        errs.required(f"{path}.containerPort")
    elif not 1 <= number <= 65535:
        errs.invalid(f"{path}.containerPort", number, "must be between 1 and 65535, inclusive")
    host = port.get("hostPort", 0)
    if host and not 1 <= host <= 65535:
        errs.invalid(f"{path}.hostPort", host, "must be between 1 and 65535, inclusive")
    protocol = port.get("protocol", "")
    if protocol == "":
        errs.required(f"{path}.protocol")
    elif protocol not in PROTOCOLS:
        errs.not_supported(f"{path}.protocol", protocol, PROTOCOLS)


def _validate_env(env: dict[str, Any], path: str, errs: FieldErrors) -> None:
    name = env.get("name", "")
    if not name:
        errs.required(f"{path}.name")
    elif not all(" " <= ch <= "~" for ch in name) or "=" in name:
        errs.invalid(
            f"{path}.name",
            name,
            _ENV_NAME_MSG,
        )
    source = env.get("valueFrom")
    if source is None:
        return
    kinds = [
        k
        for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
        if source.get(k)
    ]
    if env.get("value"):
        errs.invalid(f"{path}.valueFrom", "", "may not be specified when `value` is not empty")
    if not kinds:
        errs.invalid(
            f"{path}.valueFrom",
            "",
            "must specify one of: `configMapKeyRef`, `secretKeyRef`, `fieldRef` or "
            "`resourceFieldRef`",
        )
    elif len(kinds) > 1:
        errs.invalid(
            f"{path}.valueFrom", "", "may not have more than one field specified at a time"
        )
    field_ref = source.get("fieldRef")
    if isinstance(field_ref, dict):
        fp = field_ref.get("fieldPath", "")
        if not fp:
            errs.required(f"{path}.valueFrom.fieldRef.fieldPath")
        elif fp not in _FIELD_REF_PATHS and not _FIELD_REF_SUBSCRIPT.match(fp):
            errs.not_supported(f"{path}.valueFrom.fieldRef.fieldPath", fp, _FIELD_REF_PATHS)
    for key in ("configMapKeyRef", "secretKeyRef"):
        ref = source.get(key)
        if isinstance(ref, dict):
            if not ref.get("key"):
                errs.required(f"{path}.valueFrom.{key}.key")
            if not ref.get("name"):
                errs.required(f"{path}.valueFrom.{key}.name")


def _is_extended(name: str) -> bool:
    return (
        "/" in name
        and "kubernetes.io/" not in name
        and not names.is_qualified_name("requests." + name)
    )


def _overcommit_allowed(name: str) -> bool:
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _validate_resource_name(name: str, path: str, errs: FieldErrors) -> bool:
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.invalid(path, name, "must be a standard resource for containers")
            return False
    elif names.is_qualified_name(name):
        for msg in names.is_qualified_name(name):
            errs.invalid(path, name, msg)
        return False
    elif "kubernetes.io/" not in name and not _is_extended(name):
        errs.invalid(path, name, "doesn't follow extended resource name standard")
        return False
    return True


def _validate_resources(resources: dict[str, Any], path: str, errs: FieldErrors) -> None:
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    parsed: dict[str, dict[str, Any]] = {"limits": {}, "requests": {}}
    for section, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            p = f"{path}.{section}[{name}]"
            if not _validate_resource_name(name, p, errs):
                continue
            try:
                q = parse_quantity(raw)
            except QuantityError:
                continue
            if q.value < 0:
                errs.invalid(p, raw, "must be greater than or equal to 0")
            elif _is_extended(name) and q.value.denominator != 1:
                errs.invalid(p, raw, "must be an integer")
            parsed[section][name] = q
    for name, q in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None:
            if q.value != limit.value and not _overcommit_allowed(name):
                errs.invalid(
                    f"{path}.requests",
                    requests[name],
                    f"must be equal to {name} limit of {limits[name]}",
                )
            elif q.value > limit.value:
                errs.invalid(
                    f"{path}.requests",
                    requests[name],
                    f"must be less than or equal to {name} limit of {limits[name]}",
                )
        elif not _overcommit_allowed(name):
            errs.required(f"{path}.limits", "Limit must be set for non overcommitable resources")


_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _validate_toleration(t: dict[str, Any], path: str, errs: FieldErrors) -> None:
    key = t.get("key", "")
    if key:
        for msg in names.is_qualified_name(key):
            errs.invalid(f"{path}.key", key, msg)
    operator = t.get("operator", "")
    if not key and operator != "Exists":
        errs.invalid(
            f"{path}.operator",
            operator,
            'operator must be Exists when `key` is empty, which means "match all values and all '
            'keys"',
        )
    if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
        errs.invalid(
            f"{path}.effect",
            t.get("effect", ""),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        )
    if operator == "Exists" and t.get("value"):
        errs.invalid(
            f"{path}.operator", t["value"], "value must be empty when `operator` is 'Exists'"
        )
    elif operator not in ("", *_TOLERATION_OPERATORS):
        errs.not_supported(f"{path}.operator", operator, _TOLERATION_OPERATORS)
    effect = t.get("effect", "")
    if effect and effect not in _TAINT_EFFECTS:
        errs.not_supported(f"{path}.effect", effect, _TAINT_EFFECTS)
