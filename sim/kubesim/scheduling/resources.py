"""Resource amounts as the scheduler counts them: cpu in millicores, everything else in whole units
(bytes for memory and ephemeral-storage), each a non-negative int.

`pod_requests` follows `resourcehelper.PodRequests` (k8s.io/component-helpers/resource): the app
containers' sum, against the largest init container (each counted with the sidecars started before
it), plus the sidecars themselves, plus `spec.overhead`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from kubesim.admission.quantity import QuantityError, parse_quantity

Resources = dict[str, int]
CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"


def amount(resource: str, quantity: Any) -> int:
    """One quantity in the scheduler's unit (an unparsable one counts as 0, as admission refuses
    it)."""
    try:
        value = parse_quantity(quantity).value
    except (QuantityError, TypeError):
        return 0
    return max(0, math.ceil(value * 1000 if resource == CPU else value))


def resource_list(raw: Mapping[str, Any] | None) -> Resources:
    return {name: amount(name, q) for name, q in (raw or {}).items()}


def add(total: Resources, more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _maximum(into: Resources, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
"""What scoring counts for a container that requests no cpu or memory
(`schedutil.GetNonzeroRequests`), so that pods without requests still spread."""


def _container_requests(container: Mapping[str, Any], nonzero: bool) -> Resources:
    resources = container.get("resources") or {}
    # Admission copies a limit into an unset request; done here too for objects built without it.
    requests = resource_list(
        {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    )
    if nonzero:
        requests[CPU] = requests.get(CPU) or DEFAULT_MILLI_CPU
        requests[MEMORY] = requests.get(MEMORY) or DEFAULT_MEMORY
    return requests


def pod_requests(spec: Mapping[str, Any], *, nonzero: bool = False) -> Resources:
    """What a pod asks of its node; `pods` is not included (every pod takes one). `nonzero`: as
    scoring counts it, an unset cpu or memory request as the defaults above."""
    requests: Resources = {}
    for container in spec.get("containers") or ():
        add(requests, _container_requests(container, nonzero))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or ():
        own = _container_requests(container, nonzero)
        if container.get("restartPolicy") == "Always":
            add(requests, own)
            add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            add(during, sidecars)
        _maximum(init_peak, during)
    _maximum(requests, init_peak)
    add(requests, resource_list(spec.get("overhead")))
    return {name: value for name, value in requests.items() if value > 0}


def total(amounts: Iterable[Mapping[str, int]]) -> Resources:
    summed: Resources = {}
    for one in amounts:
        add(summed, one)
    return summed
