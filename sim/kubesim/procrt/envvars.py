"""The environment the kubelet computes for a container, and Kubernetes' `$(VAR)` expansion.

`kubelet_env` is kubelet 1.32's `makeEnvironmentVariables`: `envFrom`, then `env`, each value
expanded against what is defined before it, `valueFrom` resolved from the pod (`kubesim.downward`),
ConfigMaps and Secrets through a `lookup(kind, name)` callable (objects as stored, or None). PATH,
HOSTNAME, HOME and the image's variables are added by `containerspec.resolve`, as containerd does.
No service-link variables: kubesim has no service IPs a pod could reach.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim import downward
from kubesim.downward import NODE_ALLOCATABLE, go_quote
from kubesim.expansion import expand  # also exported: containerspec uses them

__all__ = [
    "CREATE_CONTAINER_CONFIG_ERROR",
    "NODE_ALLOCATABLE",
    "ContainerConfigError",
    "KubeletEnv",
    "Lookup",
    "expand",
    "go_quote",
    "kubelet_env",
]

Lookup = Callable[[str, str], Mapping[str, Any] | None]
"""`lookup("ConfigMap" | "Secret", name)` in the pod's namespace: the stored object, or None."""

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"


class ContainerConfigError(Exception):
    """Why the kubelet/runtime cannot create the container: `reason` becomes the container's waiting
    reason (`CreateContainerConfigError`, `CreateContainerError`), `message` its message and the
    text of the `Failed` event (`Error: <message>`)."""

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


def _config_error(message: str) -> ContainerConfigError:
    return ContainerConfigError(CREATE_CONTAINER_CONFIG_ERROR, message)


def _is_env_var_name(name: str) -> bool:
    # RelaxedEnvironmentVariableValidation (beta, on by default in 1.32, the version kubesim
    # serves): any printable ASCII but '='. kubesim's admission validates `env` names by the same
    # rule, so a key that the API accepts in `env` is never dropped from `envFrom`.
    return bool(name) and "=" not in name and all(" " <= ch <= "~" for ch in name)


class _Sources:
    """ConfigMaps and Secrets, each fetched at most once per container as the kubelet does, so every
    variable of one container sees the same version of an object."""

    def __init__(self, lookup: Lookup, namespace: str) -> None:
        self._lookup = lookup
        self._namespace = namespace
        self._found: dict[tuple[str, str], Mapping[str, str]] = {}

    def data(self, kind: str, name: str, optional: bool) -> Mapping[str, str] | None:
        """The object's data, or None when it is missing and optional; missing otherwise is an
        error."""
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
            # Values are bytes: undecodable ones survive as surrogates, and os.fsencode() at exec
            # time gives the exact bytes back.
            data = {
                str(k): base64.b64decode(str(v)).decode("utf-8", "surrogateescape")
                for k, v in raw.items()
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
    position of its first definition (envFrom before env, declaration order within each) and takes
    its last value, the way containerd later merges it over the image's variables.
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
                    f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {label} "
                    f"{namespace}/{name} "
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
    try:
        if source.get("fieldRef") is not None:
            ref = source["fieldRef"]
            return downward.pod_field_value(
                pod,
                str(ref.get("fieldPath") or ""),
                api_version=str(ref.get("apiVersion") or "v1"),
                pod_ips=pod_ips,
                host_ips=host_ips,
                node_name=node_name,
            )
        if source.get("resourceFieldRef") is not None:
            return downward.env_resource_value(
                source["resourceFieldRef"], pod, container, allocatable
            )
    except downward.DownwardAPIError as err:
        raise _config_error(str(err)) from err
    if source.get("configMapKeyRef") is not None:
        return sources.key("ConfigMap", source["configMapKeyRef"])
    if source.get("secretKeyRef") is not None:
        return sources.key("Secret", source["secretKeyRef"])
    # A source this kubelet does not know (fileKeyRef came in 1.34): the variable is set, empty.
    return ""
