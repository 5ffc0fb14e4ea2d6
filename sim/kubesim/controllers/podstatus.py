"""Pure rendering of a simulated pod's `status` from its `PodRuntime`, as kubelet 1.32 reports it.

Conditions, container and init-container statuses, QoS class and addresses; `podstate.py` owns the
lifecycle that decides what the runtime is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kubesim.controllers.podstate import (
    SIGKILL_EXIT_CODE,
    PodRuntime,
    PodTiming,
    Termination,
    is_ready,
)

Condition = tuple[str, bool, str | None, str | None]
"""(type, status, reason, message) of one pod condition."""


@dataclass(frozen=True)
class Placement:
    """Where the pod runs: node addresses and the pod IP (None until the sandbox is up)."""

    host_ip: str
    pod_ip: str | None


def qos_class(spec: Mapping[str, Any]) -> str:
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    requests_or_limits = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        if requests or limits:
            requests_or_limits = True
        for r in ("cpu", "memory"):
            if r not in limits or requests.get(r, limits[r]) != limits[r]:
                guaranteed = False
    if not requests_or_limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


@lru_cache(maxsize=8192)  # every sync renders every container's IDs again
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def container_id(pod_uid: str, name: str, restart_count: int) -> str:
    return "containerd://" + _digest(f"{pod_uid}/{name}/{restart_count}")


def _terminated(t: Termination, ts: Callable[[float], str], container_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "exitCode": t.exit_code,
        "reason": t.reason,
        "finishedAt": ts(t.finished_at),
    }
    if t.started_at is not None:
        out["startedAt"] = ts(t.started_at)
        out["containerID"] = container_id
    return out


def base_status(container: Mapping[str, Any], restart_count: int) -> dict[str, Any]:
    image = str(container.get("image", ""))
    return {
        "name": str(container.get("name", "")),
        "image": image,
        "imageID": f"{image}@sha256:{_digest(image)}" if image else "",
        "ready": False,
        "restartCount": restart_count,
        "started": False,
        "lastState": {},
    }


def _container_status(
    pod_uid: str,
    container: Mapping[str, Any],
    rt: PodRuntime,
    ready: bool,
    ts: Callable[[float], str],
    waiting_reason: str,
) -> dict[str, Any]:
    name = str(container.get("name", ""))
    cid = container_id(pod_uid, name, rt.restart_count)
    status = base_status(container, rt.restart_count)
    status.update(ready=ready, started=rt.stage == "Running")
    if rt.stage in ("Pending", "Initializing") or (
        rt.container_started_at is None and rt.init_runs
    ):
        # Not created yet, or the pod ended during initialization: app containers never ran.
        status["state"] = {"waiting": {"reason": waiting_reason}}
        return status
    status["containerID"] = cid
    if rt.last_termination is not None:
        prev = container_id(pod_uid, name, rt.restart_count - 1)
        status["lastState"] = {"terminated": _terminated(rt.last_termination, ts, prev)}
    if rt.stage == "Running":
        assert rt.container_started_at is not None
        status["state"] = {"running": {"startedAt": ts(rt.container_started_at)}}
    else:
        assert rt.termination is not None
        status["state"] = {"terminated": _terminated(rt.termination, ts, cid)}
    return status


def _init_status(
    pod_uid: str,
    index: int,
    container: Mapping[str, Any],
    rt: PodRuntime,
    timing: PodTiming,
    ts: Callable[[float], str],
) -> dict[str, Any]:
    name = str(container.get("name", ""))
    current = index == len(rt.init_runs) - 1
    restarts = rt.init_restart_count if current else 0
    status = base_status(container, restarts)
    if index >= len(rt.init_runs):
        status["state"] = {"waiting": {"reason": "PodInitializing"}}
        return status
    run = rt.init_runs[index]
    cid = container_id(pod_uid, "init/" + name, restarts)
    status["containerID"] = cid
    if current and rt.init_last_termination is not None:
        prev = container_id(pod_uid, "init/" + name, restarts - 1)
        status["lastState"] = {"terminated": _terminated(rt.init_last_termination, ts, prev)}
    sidecar = index < len(timing.init_sidecars) and timing.init_sidecars[index]
    if run.finished_at is not None:
        # A completed init container reports ready (kubelet: terminated with exit code 0).
        status["ready"] = True
        status["state"] = {
            "terminated": _terminated(Termination.of(0, run.started_at, run.finished_at), ts, cid)
        }
    elif rt.stage != "Terminated":
        status.update(started=True, ready=sidecar)
        status["state"] = {"running": {"startedAt": ts(run.started_at)}}
    else:
        assert rt.termination is not None
        if sidecar:
            # Sidecars are stopped with the pod: SIGKILL on eviction, else SIGTERM and its exit
            # code.
            code = SIGKILL_EXIT_CODE if rt.reason == "Evicted" else timing.termination_exit_code
            ended = Termination.of(code, run.started_at, rt.termination.finished_at)
        else:
            ended = rt.termination
        status["state"] = {"terminated": _terminated(ended, ts, cid)}
    return status


def _incomplete_init(spec: Mapping[str, Any], rt: PodRuntime, timing: PodTiming) -> list[str]:
    """Init containers still holding the pod back: regular ones not completed, sidecars not
    started."""
    names = []
    for i, c in enumerate(spec.get("initContainers") or []):
        sidecar = i < len(timing.init_sidecars) and timing.init_sidecars[i]
        started = i < len(rt.init_runs)
        done = started and (sidecar or rt.init_runs[i].finished_at is not None)
        if not done:
            names.append(str(c.get("name", "")))
    return names


def render_status(
    pod: Mapping[str, Any],
    rt: PodRuntime,
    timing: PodTiming,
    now: float,
    placement: Placement,
    ts: Callable[[float], str],
) -> dict[str, Any]:
    """The pod's whole `.status` as the kubelet would report it now (conditions keep their
    times)."""
    spec = pod.get("spec") or {}
    uid = str((pod.get("metadata") or {}).get("uid", ""))
    containers = sorted(spec.get("containers") or [], key=lambda c: str(c.get("name", "")))
    ready = is_ready(rt, timing, now)
    terminal = rt.stage == "Terminated"
    init_containers = spec.get("initContainers") or []
    has_init = bool(init_containers)

    waiting = "PodInitializing" if has_init else "ContainerCreating"
    statuses = [_container_status(uid, c, rt, ready, ts, waiting) for c in containers]
    unready = [s["name"] for s in statuses if not s["ready"]]
    not_ready_reason = "PodCompleted" if terminal else "ContainersNotReady"
    not_ready_message = (
        None if terminal else f"containers with unready status: [{' '.join(unready)}]"
    )
    incomplete = _incomplete_init(spec, rt, timing) if rt.container_started_at is None else []
    initialized = not incomplete
    init_message = (
        f"containers with incomplete status: [{' '.join(incomplete)}]" if incomplete else None
    )
    conditions: list[Condition] = [
        ("PodReadyToStartContainers", rt.stage in ("Initializing", "Running"), None, None),
        (
            "Initialized",
            initialized,
            None if initialized else "ContainersNotInitialized",
            init_message,
        ),
        ("Ready", ready, None if ready else not_ready_reason, None if ready else not_ready_message),
        (
            "ContainersReady",
            ready,
            None if ready else not_ready_reason,
            None if ready else not_ready_message,
        ),
        ("PodScheduled", True, None, None),
    ]
    if rt.reason == "Evicted":
        conditions.append(("DisruptionTarget", True, "TerminationByKubelet", rt.message))
    init_statuses = (
        [_init_status(uid, i, c, rt, timing, ts) for i, c in enumerate(init_containers)]
        if has_init
        else None
    )
    pod_ip = placement.pod_ip if rt.started_at is not None else None
    return pod_status(
        pod,
        phase=rt.phase,
        conditions=conditions,
        placement=Placement(placement.host_ip, pod_ip),
        start_time=ts(rt.created_at),
        container_statuses=statuses,
        init_statuses=init_statuses,
        reason=rt.reason,
        message=rt.message,
        now=ts(now),
    )


def pod_status(
    pod: Mapping[str, Any],
    *,
    phase: str,
    conditions: list[Condition],
    placement: Placement,
    start_time: str,
    container_statuses: list[dict[str, Any]],
    init_statuses: list[dict[str, Any]] | None,
    reason: str | None,
    message: str | None,
    now: str,
) -> dict[str, Any]:
    """The `.status` envelope both runtimes write: conditions keep their transition times, foreign
    conditions and fields are kept, the pod IP appears once the sandbox has one."""
    spec = pod.get("spec") or {}
    old = dict(pod.get("status") or {})
    own = {c[0] for c in conditions}
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    rendered: list[dict[str, Any]] = []
    for ctype, ok, why, text in conditions:
        value = "True" if ok else "False"
        prev = previous.get(ctype)
        when = prev.get("lastTransitionTime") if prev and prev.get("status") == value else now
        # No `lastProbeTime: null`: the API server drops nulls, and the kubelet writes only a status
        # that differs from the stored one (a null there made every sync a write).
        cond: dict[str, Any] = {"type": ctype, "status": value, "lastTransitionTime": when}
        if why:
            cond["reason"] = why
        if text:
            cond["message"] = text
        rendered.append(cond)
    rendered.extend(c for c in old.get("conditions") or [] if c.get("type") not in own)

    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("reason", "message", "podIP", "podIPs")},
        "phase": phase,
        "conditions": rendered,
        "hostIP": placement.host_ip,
        "hostIPs": [{"ip": placement.host_ip}],
        "startTime": start_time,
        "containerStatuses": container_statuses,
        "qosClass": old.get("qosClass") or qos_class(spec),
    }
    if placement.pod_ip is not None:
        status["podIP"] = placement.pod_ip
        status["podIPs"] = [{"ip": placement.pod_ip}]
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if reason is not None:
        status["reason"] = reason
    if message is not None:
        status["message"] = message
    return status
