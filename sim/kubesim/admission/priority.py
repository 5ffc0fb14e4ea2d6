"""The Priority admission plugin (`plugin/pkg/admission/priority/admission.go`), as functions of
data.

On pod CREATE, `priorityClassName` (or the `globalDefault` class, else none) resolves into
`spec.priority` and `spec.preemptionPolicy`; on UPDATE the stored values carry over when a client
omits them. PriorityClass writes may not make a second `globalDefault`. A refusal is a
`PriorityRefusal`, which the cluster answers as 403 Forbidden with its message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PREFIX = "system-"
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
"""The classes the apiserver creates at start (`pkg/apis/scheduling/types.go`)."""


class PriorityRefusal(Exception):
    """The plugin refuses the object; the message is the `... is forbidden: <message>` part."""


def default_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The `globalDefault` class; should a race have made several, the one with the lowest value."""
    found: Mapping[str, Any] | None = None
    for pc in classes:
        value = int(pc.get("value") or 0)
        if pc.get("globalDefault") and (found is None or int(found.get("value") or 0) > value):
            found = pc
    return found


def admit_pod_create(spec: dict[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> None:
    """Resolves the pod's priority in place from `classes` (by name); raises PriorityRefusal."""
    name = spec.get("priorityClassName") or ""
    if not name:
        default = default_class(classes.values())
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
        else:
            spec.pop("priorityClassName", None)
        priority = int(default["value"]) if default is not None else 0
        policy = (default or {}).get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY
    else:
        pc = classes.get(str(name))
        if pc is None:
            raise PriorityRefusal(f"no PriorityClass with name {name} was found")
        priority = int(pc.get("value") or 0)
        policy = pc.get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY
    given = spec.get("priority")
    if given is not None and given != priority:
        raise PriorityRefusal(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority "
            f"admission controller computed {priority} from the given PriorityClass name"
        )
    spec["priority"] = priority
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise PriorityRefusal(
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod "
            "spec; "
            f"priority admission controller computed {policy} from the given PriorityClass name"
        )
    spec["preemptionPolicy"] = policy


def admit_pod_update(spec: dict[str, Any], old_spec: Mapping[str, Any]) -> None:
    """Keeps the stored priority and policy when an update omits them (validation forbids
    changes)."""
    for key in ("priority", "preemptionPolicy"):
        if spec.get(key) is None and old_spec.get(key) is not None:
            spec[key] = old_spec[key]


def check_global_default(
    pc: Mapping[str, Any], classes: Iterable[Mapping[str, Any]], *, create: bool
) -> None:
    """A second `globalDefault` class is refused (the plugin's validating half)."""
    if not pc.get("globalDefault"):
        return
    default = default_class(classes)
    if default is None:
        return
    current = default["metadata"]["name"]
    if create or current != (pc.get("metadata") or {}).get("name"):
        raise PriorityRefusal(
            f"PriorityClass {current} is already marked as default. Only one default can exist"
        )
