"""`meta.k8s.io/v1` representations other than the object itself: Table (what `kubectl get` prints)
and PartialObjectMetadata (metadata-only clients), chosen from the Accept header by `render`.

Custom resources get the CRD version's `additionalPrinterColumns` (evaluated with the restricted
JSONPath the apiserver allows there); built-in kinds get the columns the apiserver's printers give
the common ones. `date` cells are humanised on the server (`13s`, `5m3s`, `2d4h`) as the apiserver
does. Each row carries its object as `includeObject` asks (`kubectl get --sort-by` asks `Object`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from kubesim import errors
from kubesim.registry import ResourceType

Column = dict[str, Any]
_NAME: Column = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name",
    "priority": 0,
}
_AGE: Column = {"name": "Age", "type": "date", "format": "", "description": "Age", "priority": 0}


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(stamp: Any, now: datetime) -> str | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return human_duration((now - moment).total_seconds())


# --- restricted JSONPath (`.a.b`, `['a.b']`, `[0]`, `[-1:]`, `[*]`, `[?(@.type=="Ready")]`) -------
_TOKEN = re.compile(
    r"""\.\.?(?P<field>[A-Za-z0-9_\-$]+)"""
    r"""|\[\s*'(?P<quoted>[^']*)'\s*\]|\[\s*"(?P<dquoted>[^"]*)"\s*\]"""
    r"""|\[\s*(?P<index>-?\d+)\s*\]|\[\s*(?P<star>\*)\s*\]|\.(?P<dotstar>\*)"""
    r"""|\[\s*(?P<start>-?\d+)?\s*(?P<colon>:)\s*(?P<end>-?\d+)?\s*\]"""
    r"""|\[\s*\?\(\s*@(?P<fpath>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*(?P<lit>'[^']*'|"[^"]*"|[^)\s]+)\s*\)\s*\]"""
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    """All values `path` selects in `obj` (empty when nothing matches or the path does not
    parse)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    current: list[Any] = [obj]
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            return []
        pos = m.end()
        current = _step(current, m)
    return current


def _step(values: Iterable[Any], m: re.Match[str]) -> list[Any]:
    out: list[Any] = []
    key = m.group("field") or m.group("quoted") or m.group("dquoted")
    for value in values:
        if key is not None:
            if isinstance(value, dict) and key in value:
                out.append(value[key])
        elif m.group("index") is not None:
            index = int(m.group("index"))
            if isinstance(value, list) and -len(value) <= index < len(value):
                out.append(value[index])
        elif m.group("colon"):
            # A slice, as CRD printer columns use it (`.status.conditions[-1:].type`).
            if isinstance(value, list):
                start, end = m.group("start"), m.group("end")
                out.extend(value[slice(int(start) if start else None, int(end) if end else None)])
        elif m.group("star") or m.group("dotstar"):
            out.extend(
                value
                if isinstance(value, list)
                else value.values()
                if isinstance(value, dict)
                else []
            )
        elif m.group("fpath"):
            literal = m.group("lit").strip("'\"")
            for item in value if isinstance(value, list) else []:
                found = jsonpath(item, m.group("fpath"))
                text = None
                if found:
                    text = str(found[0]).lower() if isinstance(found[0], bool) else str(found[0])
                if (text == literal) == (m.group("op") == "=="):
                    out.append(item)
    return out


# --- columns --------------------------------------------------------------------------------------
def _custom_cell(column: Column, obj: dict[str, Any], now: datetime) -> Any:
    found = jsonpath(obj, str(column.get("jsonPath", "")))
    if not found:
        return None
    value = found[0]
    kind = column.get("type", "string")
    if kind == "date":
        return _age(value, now)
    if kind == "integer":
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _init_reason(spec: dict[str, Any], status: dict[str, Any]) -> str | None:
    """kubectl's printPod for init containers: `Init:N/M`, `Init:<reason>`, or None once
    initialized."""
    init_specs = spec.get("initContainers") or []
    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}
    for i, container in enumerate(status.get("initContainerStatuses") or []):
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting") or {}
        if terminated is not None and terminated.get("exitCode") == 0:
            continue
        if container.get("name") in sidecars and container.get("started"):
            continue
        if terminated is not None:
            if terminated.get("reason"):
                return f"Init:{terminated['reason']}"
            if terminated.get("signal"):
                return f"Init:Signal:{terminated['signal']}"
            return f"Init:ExitCode:{terminated.get('exitCode')}"
        if waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return f"Init:{waiting['reason']}"
        return f"Init:{i}/{len(init_specs)}"
    return None


def _pod_cells(pod: dict[str, Any], now: datetime) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    init_reason = None if initialized else _init_reason(spec, status)
    for container in [] if init_reason is not None else statuses:
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
    reason = init_reason or reason
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restarts,
        _age(pod["metadata"].get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(spec, status),
    ]


def _readiness_gates(spec: dict[str, Any], status: dict[str, Any]) -> str:
    gates = [g.get("conditionType") for g in spec.get("readinessGates") or []]
    if not gates:
        return "<none>"
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g in true)}/{len(gates)}"


def _job_cells(job: dict[str, Any], now: datetime) -> list[Any]:
    status = job.get("status") or {}
    state = "Running"
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed", "Suspended"):
            state = cond["type"]
    completions = (job.get("spec") or {}).get("completions")
    done = f"{status.get('succeeded') or 0}/{completions if completions is not None else 1}"
    return [state, done, _age(job["metadata"].get("creationTimestamp"), now)]


def _node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    state = ["Ready" if ready else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        state.append("SchedulingDisabled")
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(
        {k.removeprefix(_ROLE_PREFIX) for k in labels if k.startswith(_ROLE_PREFIX)}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        ",".join(state),
        ",".join(r for r in roles if r) or "<none>",
        _age(node["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


_ROLE_PREFIX = "node-role.kubernetes.io/"


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    """The apiserver's event printer (printEvent): last seen from the series, lastTimestamp or
    eventTime."""
    series = event.get("series") or {}
    last = (
        _age(series.get("lastObservedTime"), now)
        or _age(event.get("lastTimestamp"), now)
        or _age(event.get("eventTime"), now)
    )
    first = _age(event.get("firstTimestamp"), now) or _age(event.get("eventTime"), now)
    ref = event.get("involvedObject") or {}
    kind = str(ref.get("kind", "")).lower()
    target = f"{kind}/{ref['name']}" if ref.get("name") else kind
    source = event.get("source") or {}
    origin = str(source.get("component") or event.get("reportingComponent") or "")
    if source.get("host"):
        origin = f"{origin}, {source['host']}"
    count = series.get("count") or event.get("count") or 1
    return [
        last or "<unknown>",
        event.get("type", ""),
        event.get("reason", ""),
        target,
        ref.get("fieldPath", ""),
        origin,
        str(event.get("message", "")).strip(),
        first or "<unknown>",
        int(count),
        (event.get("metadata") or {}).get("name", ""),
    ]


def _int_or_percent(value: Any) -> str:
    return "N/A" if value is None else str(value)


def _col(name: str, kind: str = "string", priority: int = 0) -> Column:
    return {"name": name, "type": kind, "format": "", "description": name, "priority": priority}


CellsFn = Callable[[dict[str, Any], datetime], list[Any]]
_BUILTIN: dict[tuple[str, str], tuple[list[Column], CellsFn]] = {
    ("", "Pod"): (
        [
            _NAME,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "integer"),
            _AGE,
            _col("IP", priority=1),
            _col("Node", priority=1),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ],
        _pod_cells,
    ),
    ("batch", "Job"): ([_NAME, _col("Status"), _col("Completions"), _AGE], _job_cells),
    # No leading Name column: the apiserver prints events this way (`cells` does not prepend the
    # name).
    ("", "Event"): (
        [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Subobject", priority=1),
            _col("Source", priority=1),
            _col("Message"),
            _col("First Seen", priority=1),
            _col("Count", "integer", priority=1),
            {**_NAME, "priority": 1},
        ],
        _event_cells,
    ),
    ("", "Node"): (
        [
            _NAME,
            _col("Status"),
            _col("Roles"),
            _AGE,
            _col("Version"),
            _col("Internal-IP", priority=1),
            _col("External-IP", priority=1),
            _col("OS-Image", priority=1),
            _col("Kernel-Version", priority=1),
            _col("Container-Runtime", priority=1),
        ],
        _node_cells,
    ),
    ("", "Namespace"): (
        [_NAME, _col("Status"), _AGE],
        lambda o, now: [
            (o.get("status") or {}).get("phase"),
            _age(o["metadata"].get("creationTimestamp"), now),
        ],
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        [_NAME, _col("Created At", "date")],
        lambda o, now: [o["metadata"].get("creationTimestamp")],
    ),
    ("policy", "PodDisruptionBudget"): (
        [
            _NAME,
            _col("Min Available"),
            _col("Max Unavailable"),
            _col("Allowed Disruptions", "integer"),
            _AGE,
        ],
        lambda o, now: [
            _int_or_percent((o.get("spec") or {}).get("minAvailable")),
            _int_or_percent((o.get("spec") or {}).get("maxUnavailable")),
            int((o.get("status") or {}).get("disruptionsAllowed") or 0),
            _age(o["metadata"].get("creationTimestamp"), now),
        ],
    ),
    ("scheduling.k8s.io", "PriorityClass"): (
        [
            _NAME,
            _col("Value", "integer"),
            _col("Global-Default", "boolean"),
            _AGE,
            _col("PreemptionPolicy"),
        ],
        lambda o, now: [
            int(o.get("value") or 0),
            bool(o.get("globalDefault")),
            _age(o["metadata"].get("creationTimestamp"), now),
            o.get("preemptionPolicy") or "",
        ],
    ),
    ("", "ConfigMap"): (
        [_NAME, _col("Data", "integer"), _AGE],
        lambda o, now: [
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            _age(o["metadata"].get("creationTimestamp"), now),
        ],
    ),
}


def columns(rt: ResourceType) -> list[Column]:
    if not rt.builtin:
        custom = [
            {
                "name": c.get("name", ""),
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                "priority": int(c.get("priority", 0)),
            }
            for c in rt.printer_columns
        ]
        return [_NAME, *custom]
    known = _BUILTIN.get((rt.group, rt.kind))
    return [*known[0]] if known else [_NAME, _AGE]


def cells(rt: ResourceType, obj: dict[str, Any], now: datetime) -> list[Any]:
    name = (obj.get("metadata") or {}).get("name", "")
    if not rt.builtin:
        return [name, *(_custom_cell(c, obj, now) for c in rt.printer_columns)]
    known = _BUILTIN.get((rt.group, rt.kind))
    if known and known[0][0] is not _NAME:
        return known[1](obj, now)
    if known:
        return [name, *known[1](obj, now)]
    return [name, _age((obj.get("metadata") or {}).get("creationTimestamp"), now)]


def partial(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as `meta.k8s.io/v1` PartialObjectMetadata."""
    meta = obj.get("metadata") or {}
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {k: v for k, v in meta.items() if k != "managedFields"},
    }


IncludeObject = Literal["None", "Metadata", "Object"]


def include_object(value: str | None) -> IncludeObject:
    """The `includeObject` table option; absent or empty means `Metadata`, as on the apiserver."""
    if value in (None, "", "Metadata"):
        return "Metadata"
    if value == "None":
        return "None"
    if value == "Object":
        return "Object"
    raise errors.bad_request(
        f'Invalid table options: includeObject: Invalid value: "{value}": '
        "must be 'Metadata', 'Object', 'None', or empty"
    )


def row(
    rt: ResourceType, obj: dict[str, Any], now: datetime, include: IncludeObject = "Metadata"
) -> dict[str, Any]:
    out: dict[str, Any] = {"cells": cells(rt, obj, now)}
    if include == "Metadata":
        out["object"] = partial(obj)
    elif include == "Object":
        out["object"] = obj
    return out


def table(
    rt: ResourceType,
    objects: Iterable[dict[str, Any]],
    *,
    resource_version: str | None = None,
    continue_token: str | None = None,
    now: datetime | None = None,
    include: IncludeObject = "Metadata",
) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    metadata: dict[str, Any] = {}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns(rt),
        "rows": [row(rt, o, now, include) for o in objects],
    }


Representation = Literal["object", "table", "metadata"]


def negotiate(accept: str) -> Representation:
    """What the Accept header asks for first: a Table, PartialObjectMetadata(List), or the object
    itself."""
    for part in accept.split(","):
        media = part.replace(" ", "")
        if "g=meta.k8s.io" in media and "as=Table" in media:
            return "table"
        if "g=meta.k8s.io" in media and "as=PartialObjectMetadata" in media:
            return "metadata"
        if media.split(";")[0] in ("application/json", "*/*", ""):
            return "object"
    return "object"


def render_list(
    rt: ResourceType,
    listed: dict[str, Any],
    how: Representation,
    now: datetime,
    include: IncludeObject = "Metadata",
) -> dict[str, Any]:
    """A `<Kind>List` from `Cluster.list` in the negotiated representation."""
    if how == "object":
        return listed
    meta = listed["metadata"]
    if how == "table":
        return table(
            rt,
            listed["items"],
            resource_version=meta["resourceVersion"],
            continue_token=meta.get("continue"),
            now=now,
            include=include,
        )
    items = [partial(o) for o in listed["items"]]
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "items": items,
    }


def render(
    rt: ResourceType,
    obj: dict[str, Any],
    how: Representation,
    now: datetime,
    include: IncludeObject = "Metadata",
) -> dict[str, Any]:
    """One object (a GET or a watch event) in the negotiated representation."""
    if how == "table":
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return table(rt, [obj], resource_version=rv, now=now, include=include)
    if how == "metadata":
        return partial(obj)
    return obj
