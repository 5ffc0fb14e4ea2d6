"""The downward API as the kubelet resolves it, for volume files (`controllers.volumes`) and env
vars (`procrt.envvars`), one entry point per consumer as upstream has.

`object_field_value` (fieldpath.ExtractFieldPathAsString: metadata only, all a volume serves);
`pod_field_value` (an env `fieldRef`, which also reads the node name, service account and IPs);
`volume_resource_value` and `env_resource_value` (a request or limit in units of `divisor`, rounded
up; they differ in whose unset limits read as the node's allocatable). Errors are `DownwardAPIError`
with the kubelet's message. Pure, on `kubesim.admission` only, so both the controllers and the
process runtime import it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from kubesim.admission.quantity import QuantityError, parse_quantity
from kubesim.names import is_qualified_name
from kubesim.nodes import UNLIMITED_ALLOCATABLE

__all__ = [
    "ENV_FIELD_PATHS",
    "NODE_ALLOCATABLE",
    "DownwardAPIError",
    "env_resource_value",
    "find_container",
    "format_map",
    "go_quote",
    "object_field_value",
    "pod_field_value",
    "split_subscript",
    "volume_resource_value",
]

NODE_ALLOCATABLE: Mapping[str, str] = UNLIMITED_ALLOCATABLE
"""The allocatable of kubesim's default node, which is all of its capacity (nothing is reserved): an
unset cpu, memory or ephemeral-storage limit reads as it in a `resourceFieldRef`."""

# pods.ConvertDownwardAPIFieldLabel's accepted v1 paths (`spec.host` is rewritten to spec.nodeName).
ENV_FIELD_PATHS = frozenset(
    [f"metadata.{name}" for name in ("annotations", "labels", "name", "namespace", "uid")]
    + [
        f"spec.{name}"
        for name in ("nodeName", "restartPolicy", "serviceAccountName", "schedulerName")
    ]
    + [f"status.{name}" for name in ("phase", "hostIP", "hostIPs", "podIP", "podIPs")]
)

_MAPS = ("metadata.annotations", "metadata.labels")
# MergeContainerResourceLimits fills these from the node; hugepages never, as they cannot be
# overcommitted.
_DEFAULTED_LIMITS = ("cpu", "memory", "ephemeral-storage")
_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


class DownwardAPIError(ValueError):
    """A `fieldRef` or `resourceFieldRef` the kubelet cannot resolve; the message is the
    kubelet's."""


# --- fieldpath ------------------------------------------------------------------------------------
def go_quote(text: str) -> str:
    """strconv.Quote, which `%q` uses: printable runes as they are, the rest as Go escapes."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0xD800 <= code <= 0xDFFF:
            # A lone surrogate cannot reach Go: its JSON decoder turns it into U+FFFD, which is
            # printable.
            out.append("\ufffd")
        elif ch.isprintable():
            # Python's printable set is Go's strconv.IsPrint: categories L, M, N, P, S and the ASCII
            # space.
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def format_map(values: Mapping[str, Any]) -> str:
    """fieldpath.FormatMap: `key="value"` lines sorted by key, no trailing newline."""
    return "\n".join(f"{key}={go_quote(str(values[key]))}" for key in sorted(values))


def split_subscript(field_path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: `metadata.labels['k']` -> (`metadata.labels`, `k`)."""
    if not field_path.endswith("']"):
        return None
    path, sep, subscript = field_path[: -len("']")].partition("['")
    if not sep or not path:
        return None
    return path, subscript


def _metadata(pod: Mapping[str, Any], field: str) -> Any:
    return (pod.get("metadata") or {}).get(field.removeprefix("metadata."))


def object_field_value(pod: Mapping[str, Any], field_path: str) -> str:
    """fieldpath.ExtractFieldPathAsString: what a downwardAPI volume item's `fieldRef` serves."""
    split = split_subscript(field_path)
    if split is not None:
        path, key = split
        if path not in _MAPS:
            raise DownwardAPIError(f"fieldPath {go_quote(field_path)} does not support subscript")
        # Annotation keys are checked case-insensitively, label keys as they are (as upstream).
        problems = is_qualified_name(key.lower() if path == "metadata.annotations" else key)
        if problems:
            raise DownwardAPIError(f"invalid key subscript in {field_path}: {';'.join(problems)}")
        value = (_metadata(pod, path) or {}).get(key)
        return "" if value is None else str(value)
    if field_path in _MAPS:
        return format_map(_metadata(pod, field_path) or {})
    if field_path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return str(_metadata(pod, field_path) or "")
    raise DownwardAPIError(f"unsupported fieldPath: {field_path}")


def _status_ips(pod: Mapping[str, Any], single: str, plural: str) -> list[str]:
    status = pod.get("status") or {}
    ips = [str(entry.get("ip", "")) for entry in status.get(plural) or []]
    return ips or ([str(status[single])] if status.get(single) else [])


def pod_field_value(
    pod: Mapping[str, Any],
    field_path: str,
    *,
    api_version: str = "v1",
    pod_ips: Sequence[str] | None = None,
    host_ips: Sequence[str] | None = None,
    node_name: str = "",
) -> str:
    """The kubelet's podFieldSelectorRuntimeValue: what an env var's `fieldRef` resolves to.

    `pod_ips` / `host_ips` are the kubelet's (the pod's status may not have them yet when its
    containers are made); None takes them from the pod's status. An unset `spec.nodeName` reads as
    `node_name`.
    """
    if api_version != "v1":
        raise DownwardAPIError(f"unsupported pod version: {api_version}")
    split = split_subscript(field_path)
    if split is not None:
        if split[0] not in _MAPS:
            raise DownwardAPIError(f"field label does not support subscript: {field_path}")
    elif field_path == "spec.host":
        field_path = "spec.nodeName"
    elif field_path not in ENV_FIELD_PATHS:
        raise DownwardAPIError(f"field label not supported: {field_path}")
    spec = pod.get("spec") or {}
    if field_path == "spec.nodeName":
        return str(spec.get("nodeName") or node_name)
    if field_path == "spec.serviceAccountName":
        return str(spec.get("serviceAccountName") or "")
    if field_path in ("status.podIP", "status.podIPs"):
        pods = _status_ips(pod, "podIP", "podIPs") if pod_ips is None else pod_ips
        return ",".join(pods) if field_path == "status.podIPs" else next(iter(pods), "")
    if field_path in ("status.hostIP", "status.hostIPs"):
        hosts = _status_ips(pod, "hostIP", "hostIPs") if host_ips is None else host_ips
        return ",".join(hosts) if field_path == "status.hostIPs" else next(iter(hosts), "")
    # Accepted by the field-label conversion but not extractable (spec.restartPolicy,
    # status.phase...) fails there as "unsupported fieldPath".
    return object_field_value(pod, field_path)


# --- pkg/api/v1/resource --------------------------------------------------------------------------
def _quantity(raw: Any, what: str) -> Fraction:
    if raw is None or raw == "":
        return Fraction(0)
    try:
        return parse_quantity(raw).value
    except QuantityError as err:
        raise DownwardAPIError(f"{what}: {err}") from err


def _scaled(value: Fraction) -> int:
    """Quantity.Value / MilliValue: rounded away from zero."""
    return math.ceil(value) if value >= 0 else math.floor(value)


def find_container(pod: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], bool]:
    """findContainerInPod (app containers first, then init containers), and whether it is an app
    container."""
    spec = pod.get("spec") or {}
    for field, app in (("containers", True), ("initContainers", False)):
        for container in spec.get(field) or []:
            if container.get("name") == name:
                return container, app
    raise DownwardAPIError(f"container {name} not found")


def _resource_value(
    ref: Mapping[str, Any], container: Mapping[str, Any], node_allocatable: Mapping[str, Any] | None
) -> str:
    """ExtractContainerResourceValue, after MergeContainerResourceLimits(`node_allocatable`) unless
    None.

    Quantity.MilliValue() (cpu) or Value() round up, then upstream divides in float64 and rounds up
    again.
    """
    resource = str(ref.get("resource") or "")
    section, _, name = resource.partition(".")
    if section not in ("limits", "requests") or not (
        name in _DEFAULTED_LIMITS or name.startswith("hugepages-")
    ):
        raise DownwardAPIError(f"unsupported container resource : {resource}")
    value = _quantity(((container.get("resources") or {}).get(section) or {}).get(name), resource)
    allocatable = node_allocatable or {}
    if value == 0 and section == "limits" and name in _DEFAULTED_LIMITS and name in allocatable:
        value = _quantity(allocatable[name], resource)
    divisor = _quantity(ref.get("divisor"), "divisor") or Fraction(1)
    if name == "cpu":
        return str(math.ceil(float(_scaled(value * 1000)) / float(_scaled(divisor * 1000))))
    return str(math.ceil(float(_scaled(value)) / float(_scaled(divisor))))


def volume_resource_value(
    pod: Mapping[str, Any],
    ref: Mapping[str, Any],
    node_allocatable: Mapping[str, Any] = NODE_ALLOCATABLE,
) -> str:
    """resource.ExtractResourceValueByContainerNameAndNodeAllocatable: a downwardAPI volume item's
    `resourceFieldRef`. The named container, app or init, has its unset (or zero) cpu, memory and
    ephemeral-storage limits read as the node's allocatable."""
    container, _ = find_container(pod, str(ref.get("containerName") or ""))
    return _resource_value(ref, container, node_allocatable)


def env_resource_value(
    ref: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    node_allocatable: Mapping[str, Any] = NODE_ALLOCATABLE,
) -> str:
    """containerResourceRuntimeValue on defaultPodLimitsForDownwardAPI's pod: an env var's
    `resourceFieldRef` in `container`. Without a `containerName` it is `container`'s own; the
    kubelet defaults the limits of that container and of the pod's app containers, so a named init
    container keeps its own (an unset limit reads as 0)."""
    if not ref.get("containerName"):
        return _resource_value(ref, container, node_allocatable)
    target, app = find_container(pod, str(ref["containerName"]))
    return _resource_value(ref, target, node_allocatable if app else None)
