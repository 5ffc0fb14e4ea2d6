"""The environment the kubelet computes for a container, and Kubernetes' `$(VAR)` expansion.

`kubelet_env` is `makeEnvironmentVariables` (pkg/kubelet/kubelet_pods.go, kubelet 1.32): `envFrom` first,
then `env`, each `env` value expanded against what is defined before it, `valueFrom` resolved from the pod,
its resources, ConfigMaps and Secrets. The runtime's own variables (PATH, HOSTNAME, HOME) and the image's
are added later, by `containerspec.resolve`, because containerd adds them, not the kubelet.

There are no Kubernetes service-link variables (`KUBERNETES_SERVICE_HOST`, `<SVC>_PORT`, ...): kubesim has
no service IPs a pod could reach, so advertising them would only make in-cluster clients fail later and
more obscurely.

Pure: ConfigMaps and Secrets come from a `lookup(kind, name)` callable answering the object as the API
stores it (Secret `data` base64-encoded) or None when it does not exist.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesim.admission.names import is_qualified_name
from kubesim.admission.quantity import QuantityError, parse_quantity

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "NODE_ALLOCATABLE",
    "ContainerConfigError",
    "KubeletEnv",
    "Lookup",
    "container_resource_value",
    "expand",
    "go_quote",
    "kubelet_env",
    "pod_field_value",
]

Lookup = Callable[[str, str], Mapping[str, Any] | None]
"""`lookup("ConfigMap" | "Secret", name)` in the pod's namespace: the stored object, or None."""

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"

NODE_ALLOCATABLE: Mapping[str, str] = {"cpu": "64", "memory": "512Gi", "ephemeral-storage": "1Ti"}
"""What a resourceFieldRef falls back to for an unset limit: the node's allocatable, which for kubesim's
node is `controllers.kubelet.NODE_CAPACITY` (a unit test keeps the two equal; importing the kubelet from
here would be circular once it drives this runtime)."""

# The kubelet fills these limits from the node when unset; hugepages never, as they cannot be overcommitted.
_DEFAULTED_LIMITS = ("cpu", "memory", "ephemeral-storage")

# pods.ConvertDownwardAPIFieldLabel's accepted v1 paths (`spec.host` is rewritten to spec.nodeName).
_FIELD_LABELS = frozenset(
    [f"metadata.{name}" for name in ("annotations", "labels", "name", "namespace", "uid")]
    + [f"spec.{name}" for name in ("nodeName", "restartPolicy", "serviceAccountName", "schedulerName")]
    + [f"status.{name}" for name in ("phase", "hostIP", "hostIPs", "podIP", "podIPs")]
)

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


class ContainerConfigError(Exception):
    """Why the kubelet/runtime cannot create the container: `reason` becomes the container's waiting
    reason (`CreateContainerConfigError`, `CreateContainerError`), `message` its message and the text of
    the `Failed` event (`Error: <message>`)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class KubeletEnv:
    env: tuple[tuple[str, str], ...]
    """Each name once, at the position it was first defined, with the value it was given last."""
    warnings: tuple[tuple[str, str], ...] = ()
    """(reason, message) of the Warning events the kubelet records on the pod."""


def expand(text: str, mapping: Mapping[str, str]) -> str:
    """third_party/forked/golang/expansion.Expand with MappingFuncFor(mapping).

    `$(NAME)` is replaced when NAME is in `mapping` and kept as is otherwise; `$$` is always `$` (so
    `$$(NAME)` gives a literal `$(NAME)`); any other `$x`, a `$(` without `)`, and a trailing `$` stay.
    The scan resumes after a replacement, so a value is never expanded twice.
    """
    if "$" not in text:
        return text
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        ch = text[i]
        if ch != "$" or i + 1 == end:
            out.append(ch)
            i += 1
            continue
        follower = text[i + 1]
        if follower == "$":
            out.append("$")
            i += 2
        elif follower == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                out.append(mapping.get(name, f"$({name})"))
                i = close + 1
        else:
            out.append("$" + follower)
            i += 2
    return "".join(out)


def go_quote(text: str) -> str:
    """Go's `%q` for the strings Kubernetes puts in messages and in `FormatMap` (downward API)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _config_error(message: str) -> ContainerConfigError:
    return ContainerConfigError(CREATE_CONTAINER_CONFIG_ERROR, message)


def _is_env_var_name(name: str) -> bool:
    # RelaxedEnvironmentVariableValidation (beta, on by default in 1.32, the version kubesim serves): any
    # printable ASCII but '='. kubesim's admission validates `env` names by the same rule, so a key that
    # the API accepts in `env` is never dropped from `envFrom`.
    return bool(name) and "=" not in name and all(" " <= ch <= "~" for ch in name)


class _Sources:
    """ConfigMaps and Secrets, each fetched at most once per container as the kubelet does, so every
    variable of one container sees the same version of an object."""

    def __init__(self, lookup: Lookup, namespace: str) -> None:
        self._lookup = lookup
        self._namespace = namespace
        self._found: dict[tuple[str, str], Mapping[str, str]] = {}

    def data(self, kind: str, name: str, optional: bool) -> Mapping[str, str] | None:
        """The object's data, or None when it is missing and optional; missing otherwise is an error."""
        cached = self._found.get((kind, name))
        if cached is not None:
            return cached
        obj = self._lookup(kind, name)
        if obj is None:
            if optional:
                return None
            # The kubelet's watch-based managers answer NotFound for the singular resource.
            raise _config_error(f'{kind.lower()} "{name}" not found')
        raw = obj.get("data") or {}
        if kind == "Secret":
            # Values are bytes: undecodable ones survive as surrogates, and os.fsencode() at exec time
            # gives the exact bytes back.
            data = {
                str(k): base64.b64decode(str(v)).decode("utf-8", "surrogateescape") for k, v in raw.items()
            }
        else:
            data = {str(k): str(v) for k, v in raw.items()}
        self._found[(kind, name)] = data
        return data

    def key(self, kind: str, ref: Mapping[str, Any]) -> str | None:
        """A `configMapKeyRef` / `secretKeyRef` value, or None when it is optional and absent."""
        name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
        optional = ref.get("optional") is True
        data = self.data(kind, name, optional)
        if data is None:
            return None
        if key not in data:
            if optional:
                return None
            raise _config_error(f"couldn't find key {key} in {kind} {self._namespace}/{name}")
        return data[key]


def kubelet_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    lookup: Lookup,
    pod_ips: Sequence[str] = (),
    host_ips: Sequence[str] = (),
    node_name: str = "",
    allocatable: Mapping[str, Any] = NODE_ALLOCATABLE,
) -> KubeletEnv:
    """The variables the kubelet hands the runtime for `container` (no image or runtime variables).

    Upstream builds a Go map, so the runtime receives them in random order; here a name keeps the
    position of its first definition (envFrom before env, declaration order within each) and takes its
    last value, the way containerd later merges it over the image's variables.
    """
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    sources = _Sources(lookup, namespace)
    env: dict[str, str] = {}
    warnings: list[tuple[str, str]] = []
    for env_from in container.get("envFrom") or []:
        prefix = str(env_from.get("prefix") or "")
        if env_from.get("configMapRef") is not None:
            ref, kind, label = env_from["configMapRef"], "ConfigMap", "configMap"
        elif env_from.get("secretRef") is not None:
            ref, kind, label = env_from["secretRef"], "Secret", "secret"
        else:
            continue
        name = str(ref.get("name") or "")
        data = sources.data(kind, name, ref.get("optional") is True)
        if data is None:
            continue
        invalid: list[str] = []
        for key, value in data.items():
            full = prefix + key
            if _is_env_var_name(full):
                env[full] = value
            else:
                invalid.append(full)
        if invalid:
            warnings.append(
                (
                    "InvalidEnvironmentVariableNames",
                    f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {label} {namespace}/{name} "
                    "were skipped since they are considered invalid environment variable names.",
                )
            )
    for var in container.get("env") or []:
        name = str(var.get("name") or "")
        value = str(var.get("value") or "")
        if value:
            value = expand(value, env)
        elif var.get("valueFrom") is not None:
            resolved = _value_from(
                var["valueFrom"], pod, container, sources, pod_ips, host_ips, node_name, allocatable
            )
            if resolved is None:
                continue
            value = resolved
        env[name] = value
    return KubeletEnv(tuple(env.items()), tuple(warnings))


def _value_from(
    source: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    sources: _Sources,
    pod_ips: Sequence[str],
    host_ips: Sequence[str],
    node_name: str,
    allocatable: Mapping[str, Any],
) -> str | None:
    if source.get("fieldRef") is not None:
        ref = source["fieldRef"]
        return pod_field_value(
            pod,
            str(ref.get("fieldPath") or ""),
            api_version=str(ref.get("apiVersion") or "v1"),
            pod_ips=pod_ips,
            host_ips=host_ips,
            node_name=node_name,
        )
    if source.get("resourceFieldRef") is not None:
        return container_resource_value(source["resourceFieldRef"], pod, container, allocatable)
    if source.get("configMapKeyRef") is not None:
        return sources.key("ConfigMap", source["configMapKeyRef"])
    if source.get("secretKeyRef") is not None:
        return sources.key("Secret", source["secretKeyRef"])
    # A source this kubelet does not know (fileKeyRef came in 1.34): the variable is set, empty.
    return ""


def _split_subscript(path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: `metadata.labels['k']` -> ("metadata.labels", "k")."""
    if not path.endswith("']"):
        return None
    head, sep, subscript = path[:-2].partition("['")
    if not sep or not head:
        return None
    return head, subscript


def _format_map(values: Mapping[str, Any]) -> str:
    return "\n".join(f"{key}={go_quote(str(values[key]))}" for key in sorted(values))


def pod_field_value(
    pod: Mapping[str, Any],
    field_path: str,
    *,
    api_version: str = "v1",
    pod_ips: Sequence[str] = (),
    host_ips: Sequence[str] = (),
    node_name: str = "",
) -> str:
    """A `fieldRef` (downward API) value, as podFieldSelectorRuntimeValue and ExtractFieldPathAsString."""
    if api_version != "v1":
        raise _config_error(f"unsupported pod version: {api_version}")
    subscripted = _split_subscript(field_path)
    if subscripted is not None:
        if subscripted[0] not in ("metadata.annotations", "metadata.labels"):
            raise _config_error(f"field label does not support subscript: {field_path}")
    elif field_path == "spec.host":
        field_path = "spec.nodeName"
    elif field_path not in _FIELD_LABELS:
        raise _config_error(f"field label not supported: {field_path}")
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if field_path == "spec.nodeName":
        return str(spec.get("nodeName") or node_name)
    if field_path == "spec.serviceAccountName":
        return str(spec.get("serviceAccountName") or "")
    if field_path == "status.hostIP":
        return host_ips[0] if host_ips else ""
    if field_path == "status.hostIPs":
        return ",".join(host_ips)
    if field_path == "status.podIP":
        return pod_ips[0] if pod_ips else ""
    if field_path == "status.podIPs":
        return ",".join(pod_ips)
    if subscripted is not None:
        path, key = subscripted
        # Annotation keys are checked case-insensitively, label keys as they are (as upstream).
        problems = is_qualified_name(key.lower() if path == "metadata.annotations" else key)
        if problems:
            raise _config_error(f"invalid key subscript in {field_path}: {';'.join(problems)}")
        values = meta.get("annotations" if path == "metadata.annotations" else "labels") or {}
        return str(values.get(key, ""))
    if field_path in ("metadata.annotations", "metadata.labels"):
        return _format_map(meta.get(field_path.partition(".")[2]) or {})
    if field_path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return str(meta.get(field_path.partition(".")[2]) or "")
    # Accepted by the field-label conversion but not extractable (spec.restartPolicy, status.phase...).
    raise _config_error(f"unsupported fieldPath: {field_path}")


def _quantity(raw: Any) -> Fraction:
    try:
        return parse_quantity(raw).value
    except QuantityError as exc:
        raise _config_error(str(exc)) from exc


def _find_container(pod: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], bool]:
    """The named container and whether it is an app container (only those get defaulted limits)."""
    spec = pod.get("spec") or {}
    for field, regular in (("containers", True), ("initContainers", False)):
        for candidate in spec.get(field) or []:
            if candidate.get("name") == name:
                return candidate, regular
    raise _config_error(f"container {name} not found")


def container_resource_value(
    ref: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    allocatable: Mapping[str, Any] = NODE_ALLOCATABLE,
) -> str:
    """A `resourceFieldRef` value (resource.ExtractContainerResourceValue on the kubelet's defaulted pod):
    the quantity divided by `divisor` (default 1), rounded up; an unset or zero cpu, memory or
    ephemeral-storage limit reads as the node's allocatable, an unset request as 0."""
    target, defaulted = container, True
    if ref.get("containerName"):
        # Upstream defaults the limits of the pod's app containers and of the container being started,
        # then looks a named container up in the pod: a named init container keeps its own limits.
        target, defaulted = _find_container(pod, str(ref["containerName"]))
    resources = target.get("resources") or {}
    resource = str(ref.get("resource") or "")
    section, _, name = resource.partition(".")
    if section not in ("limits", "requests") or not (
        name in _DEFAULTED_LIMITS or name.startswith("hugepages-")
    ):
        raise _config_error(f"unsupported container resource : {resource}")
    raw = (resources.get(section) or {}).get(name)
    value = Fraction(0) if raw is None else _quantity(raw)
    if section == "limits" and defaulted and value == 0 and name in _DEFAULTED_LIMITS and name in allocatable:
        value = _quantity(allocatable[name])
    divisor = Fraction(0) if ref.get("divisor") in (None, "") else _quantity(ref["divisor"])
    if divisor == 0:
        divisor = Fraction(1)
    # Quantity.MilliValue() / Value() round up, then upstream divides in float64 and rounds up again.
    if name == "cpu":
        return str(math.ceil(float(math.ceil(value * 1000)) / float(math.ceil(divisor * 1000))))
    return str(math.ceil(float(math.ceil(value)) / float(math.ceil(divisor))))
