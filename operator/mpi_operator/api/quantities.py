"""Resource quantities and what pod templates ask for: GPUs, whole-number resources, list sums.

The operator never rewrites a template's resources (GPUs and every other extended resource pass
through untouched); it reads them to derive slots (`defaults`), to map legacy fields (`legacy`), to
sum PodGroup `minResources` the way upstream's `addResources` does, and to size helper init
containers.

Quantities follow `k8s.io/apimachinery/pkg/api/resource`: `Quantity` parses `"500m"`, `"4Gi"`,
`"1e3"` into an exact `Decimal` and renders it back in Go's canonical form (`22`, `65Gi`, `1500m`,
`22k`), with the format (decimal or binary SI) of the first non-zero operand, as Go's `Quantity.Add`
keeps it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Final, Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX: Final = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX: Final = {0: "", **{bits // 10: suffix for suffix, bits in _BINARY.items()}}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))$"
)
_NANO: Final = Decimal(1).scaleb(-9)


@dataclass(frozen=True)
class Quantity:
    """An exact resource quantity and the format Go would render it in."""

    value: Decimal
    format: Format = "DecimalSI"

    @classmethod
    def parse(cls, raw: Any) -> Quantity:
        """A quantity from a manifest value (`2`, `"500m"`, `"4Gi"`); ValueError when it is none."""
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise ValueError(f"{raw!r} is not a resource quantity")
        if isinstance(raw, int | float):
            if not math.isfinite(raw):
                raise ValueError(f"{raw!r} is not a resource quantity")
            return cls(Decimal(str(raw)))
        match = _QUANTITY.match(raw.strip())
        if match is None:
            raise ValueError(f"{raw!r} is not a resource quantity")
        number = Decimal(match.group("number"))
        if match.group("binary"):
            return cls(number * (2 ** _BINARY[match.group("binary")]), "BinarySI")
        if match.group("exp"):
            return cls(number.scaleb(int(match.group("exp")[1:])), "DecimalExponent")
        return cls(number.scaleb(_DECIMAL[match.group("decimal") or ""]))

    def __add__(self, other: Quantity) -> Quantity:
        fmt = self.format if self.value != 0 else other.format
        return Quantity(self.value + other.value, fmt)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity(self.value * factor, self.format)

    def __str__(self) -> str:
        """Go's `Quantity.String()` (canonical form); sub-nano precision rounds up, as Go does."""
        value = (self.value / _NANO).to_integral_value(ROUND_CEILING) * _NANO
        if value == 0:
            return "0"
        if self.format == "BinarySI" and abs(value) >= 1024 and value == value.to_integral_value():
            number, power = int(value), 0
            while number % 1024 == 0 and power < max(_BINARY_SUFFIX):
                number //= 1024
                power += 1
            return f"{number}{_BINARY_SUFFIX[power]}"
        return _decimal_string(value, exponent_form=self.format == "DecimalExponent")


def _decimal_string(value: Decimal, *, exponent_form: bool) -> str:
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits))) * (-1 if sign else 1)
    # Go moves the exponent down to a multiple of three and strips zeros three at a time.
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    while exponent > 18:
        mantissa *= 1000
        exponent -= 3
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


ResourceList = dict[str, Quantity]


def add_resources(total: ResourceList, resources: Mapping[str, Any], replicas: int) -> ResourceList:
    """Upstream `addResources`: `total` plus `replicas` times (requests, falling back to limits per
    name).

    Returns a new mapping; unparsable quantities are skipped (the API server would refuse the pod).
    """
    merged: dict[str, Any] = {}
    requests = resources.get("requests")
    limits = resources.get("limits")
    if isinstance(requests, Mapping):
        merged.update(requests)
    if isinstance(limits, Mapping):
        for name, value in limits.items():
            merged.setdefault(name, value)
    result = dict(total)
    for name, raw in merged.items():
        try:
            quantity = Quantity.parse(raw) * replicas
        except ValueError:
            continue
        result[name] = result[name] + quantity if name in result else quantity
    return result


def render_resource_list(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """A ResourceList as JSON: name -> canonical quantity string, names sorted."""
    return {name: str(resources[name]) for name in sorted(resources)}


def whole_quantity(value: Any) -> int | None:
    """An integer resource quantity (`8`, `"8"`); None for fractions, suffixes and junk."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def container_resource(container: Mapping[str, Any], resource: str) -> int | None:
    """A container's whole-number limit (else request) for `resource`, None when it names none."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, Mapping) and resource in values:
            return whole_quantity(values[resource])
    return None


def cpu_and_memory(resources: Any) -> dict[str, Any]:
    """Only the `cpu` / `memory` entries of a container's resources (for helper init containers).

    Copying them satisfies a ResourceQuota that demands limits without raising the pod's effective
    request (the max over init containers never exceeds the sum over app containers that has them);
    extended resources such as GPUs are left out so no device is allocated to a helper.
    """
    if not isinstance(resources, Mapping):
        return {}
    out: dict[str, Any] = {}
    for section in ("requests", "limits"):
        values = resources.get(section)
        if isinstance(values, Mapping):
            kept = {k: v for k, v in values.items() if k in ("cpu", "memory")}
            if kept:
                out[section] = kept
    return out


def is_gpu_resource(name: str) -> bool:
    """`nvidia.com/gpu`, `amd.com/gpu`, `gpu.intel.com/i915`, any `*.com/gpu`: upstream v1's GPU
    test."""
    return "gpu" in name.lower()


def pod_containers(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The `spec.containers` of a pod template, skipping anything malformed."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list):
        return []
    return [x for x in containers if isinstance(x, Mapping)]


def container_gpus(container: Mapping[str, Any]) -> int:
    """GPUs one container asks for: per GPU resource name its limit, else its request, summed.

    Extended resources cannot be overcommitted (requests equal limits when both are set), so the
    limit is authoritative; a fraction rounds up, since a device plugin only hands out whole
    devices.
    """
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return 0
    amounts: dict[str, Any] = {}
    for section in ("requests", "limits"):
        values = resources.get(section)
        if isinstance(values, Mapping):
            amounts.update({name: v for name, v in values.items() if is_gpu_resource(str(name))})
    total = 0
    for raw in amounts.values():
        try:
            total += math.ceil(Quantity.parse(raw).value)
        except ValueError:
            continue
    return max(total, 0)


def pod_gpus(template: Mapping[str, Any]) -> int:
    """GPUs one pod of `template` asks for, over its (non-init) containers."""
    return sum(container_gpus(container) for container in pod_containers(template))
