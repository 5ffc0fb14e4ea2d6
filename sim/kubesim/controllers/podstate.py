"""Pure pod lifecycle of the simulated kubelet: annotations + times + restartPolicy -> pod status.

Nothing here does I/O or reads a clock: times are simulated seconds passed in, and `render_status` gets a
function that turns them into RFC 3339 timestamps. The kubelet (`kubelet.py`) keeps one `PodRuntime` per
pod, calls `advance` whenever a timer or an event wakes it, and writes what `render_status` returns.

Stages: Pending (sandbox and containers being created) -> Initializing (phase still Pending: the
sandbox is up and `spec.initContainers` run one at a time, `init-seconds` each) -> Running (containers
up; Ready once `ready-seconds` have passed since the container started) -> Terminated (phase Succeeded
or Failed). A container exit with restartPolicy Always, or OnFailure and a non-zero code, restarts it in
place (restartCount + 1, lastState terminated) without a CrashLoopBackOff delay; a failing init container
(`init-exit-code`) does the same, or fails the pod under restartPolicy Never. Sidecars (init containers
with `restartPolicy: Always`) start and keep running without blocking the next init container; they
are stopped with the pod.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

START_SECONDS = "kubesim/start-seconds"
READY_SECONDS = "kubesim/ready-seconds"
RUN_SECONDS = "kubesim/run-seconds"
EXIT_CODE = "kubesim/exit-code"
READY = "kubesim/ready"
TERMINATION_SECONDS = "kubesim/termination-seconds"
TERMINATION_EXIT_CODE = "kubesim/termination-exit-code"
INIT_SECONDS = "kubesim/init-seconds"
INIT_EXIT_CODE = "kubesim/init-exit-code"

DEFAULT_TERMINATION_SECONDS = 0.2
DEFAULT_INIT_SECONDS = 0.1
SIGTERM_EXIT_CODE = 143
SIGKILL_EXIT_CODE = 137
# A pod whose run-seconds is ~0 under restartPolicy Always would otherwise restart forever in one call.
MAX_EXITS_PER_ADVANCE = 100

Stage = Literal["Pending", "Initializing", "Running", "Terminated"]
RestartPolicy = Literal["Always", "OnFailure", "Never"]


def _optional_seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        parsed = float(value)
    except ValueError:
        return None
    return parsed if parsed >= 0 else None


def _seconds(value: str | None, default: float) -> float:
    parsed = _optional_seconds(value)
    return default if parsed is None else parsed


def _int(value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


@dataclass(frozen=True)
class PodTiming:
    """The `kubesim/*` annotations of one pod, with the cluster defaults filled in, and which of its
    init containers are sidecars (one flag per `spec.initContainers` entry, in order)."""

    start: float
    ready: float
    run: float | None = None
    exit_code: int = 0
    never_ready: bool = False
    termination: float = DEFAULT_TERMINATION_SECONDS
    termination_exit_code: int = SIGTERM_EXIT_CODE
    init: float = DEFAULT_INIT_SECONDS
    init_exit_code: int = 0
    init_sidecars: tuple[bool, ...] = ()

    @classmethod
    def from_annotations(
        cls,
        annotations: Mapping[str, str],
        *,
        start_default: float,
        ready_default: float,
        min_run: float = 0.0,
        init_containers: Sequence[Mapping[str, Any]] = (),
    ) -> PodTiming:
        """`min_run` bounds how fast a crashing container can restart (no busy loop on run-seconds 0)."""
        run = _optional_seconds(annotations.get(RUN_SECONDS))
        init = _seconds(annotations.get(INIT_SECONDS), DEFAULT_INIT_SECONDS)
        init_exit_code = _int(annotations.get(INIT_EXIT_CODE), 0)
        return cls(
            start=_seconds(annotations.get(START_SECONDS), start_default),
            ready=_seconds(annotations.get(READY_SECONDS), ready_default),
            run=None if run is None else max(run, min_run),
            exit_code=_int(annotations.get(EXIT_CODE), 0),
            never_ready=annotations.get(READY, "").lower() == "false",
            termination=_seconds(annotations.get(TERMINATION_SECONDS), DEFAULT_TERMINATION_SECONDS),
            termination_exit_code=_int(annotations.get(TERMINATION_EXIT_CODE), SIGTERM_EXIT_CODE),
            # Only a failing init container restarts, so only then does it need the floor.
            init=init if init_exit_code == 0 else max(init, min_run),
            init_exit_code=init_exit_code,
            init_sidecars=tuple(is_sidecar(c) for c in init_containers),
        )


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """A restartable init container (KEP-753): started in order, then kept running beside the others."""
    return container.get("restartPolicy") == "Always"


@dataclass(frozen=True)
class Termination:
    """How a container run ended (containerStatuses[].state.terminated)."""

    exit_code: int
    reason: str
    started_at: float | None
    finished_at: float

    @classmethod
    def of(cls, exit_code: int, started_at: float | None, finished_at: float) -> Termination:
        return cls(exit_code, "Completed" if exit_code == 0 else "Error", started_at, finished_at)


@dataclass(frozen=True)
class InitRun:
    """The latest run of one init container; a sidecar's `finished_at` stays None while the pod lives."""

    started_at: float
    finished_at: float | None = None


@dataclass(frozen=True)
class PodRuntime:
    """What the kubelet knows about one pod's containers, in simulated seconds."""

    created_at: float
    stage: Stage = "Pending"
    started_at: float | None = None
    container_started_at: float | None = None
    restart_count: int = 0
    last_termination: Termination | None = None
    termination: Termination | None = None
    reason: str | None = None
    message: str | None = None
    volumes_blocked: bool = False
    """A volume could not be mounted when the pod was due to start (ContainerCreating)."""
    init_runs: tuple[InitRun, ...] = ()
    """One entry per init container started so far, in spec order; the last one is the one running."""
    init_restart_count: int = 0
    """Restarts of the last entry of `init_runs` (earlier ones completed, so they never restart)."""
    init_last_termination: Termination | None = None

    @property
    def phase(self) -> str:
        if self.stage == "Initializing":
            return "Pending"
        if self.stage != "Terminated":
            return self.stage
        assert self.termination is not None
        return "Succeeded" if self.termination.exit_code == 0 and self.reason is None else "Failed"


def advance(
    rt: PodRuntime, timing: PodTiming, policy: RestartPolicy, now: float, *, can_start: bool = True
) -> PodRuntime:
    """Applies every transition due at or before `now` (start, init containers, exits, restarts), each
    at its due time."""
    if rt.stage == "Pending":
        # Once blocked on a volume, the containers start when the kubelet finds it mountable: now.
        due = now if rt.volumes_blocked else rt.created_at + timing.start
        if now < due:
            return rt
        if not can_start:
            return rt if rt.volumes_blocked else dataclasses.replace(rt, volumes_blocked=True)
        rt = _start_init_containers(
            dataclasses.replace(rt, stage="Initializing", started_at=due), timing, due
        )
    for _ in range(MAX_EXITS_PER_ADVANCE):
        if rt.stage == "Initializing":
            exit_at = rt.init_runs[-1].started_at + timing.init
            if now < exit_at:
                return rt
            rt = _init_container_exited(rt, timing, exit_at, policy)
            continue
        if rt.stage != "Running" or timing.run is None:
            return rt
        assert rt.container_started_at is not None
        exit_at = rt.container_started_at + timing.run
        if now < exit_at:
            return rt
        rt = container_exited(rt, timing.exit_code, exit_at, policy)
    return rt


def _start_init_containers(rt: PodRuntime, timing: PodTiming, at: float) -> PodRuntime:
    """Starts the init containers after the last one started, up to and including the next one that
    must complete first; once none is left, the app containers start."""
    runs = list(rt.init_runs)
    while len(runs) < len(timing.init_sidecars):
        runs.append(InitRun(at))
        if not timing.init_sidecars[len(runs) - 1]:
            return dataclasses.replace(rt, init_runs=tuple(runs))
    return dataclasses.replace(rt, stage="Running", init_runs=tuple(runs), container_started_at=at)


def _init_container_exited(rt: PodRuntime, timing: PodTiming, at: float, policy: RestartPolicy) -> PodRuntime:
    current = rt.init_runs[-1]
    code = timing.init_exit_code
    if code == 0:
        done = (*rt.init_runs[:-1], InitRun(current.started_at, at))
        reset = dataclasses.replace(rt, init_runs=done, init_restart_count=0, init_last_termination=None)
        return _start_init_containers(reset, timing, at)
    ended = Termination.of(code, current.started_at, at)
    if policy == "Never":
        # The pod fails; its app containers never ran, so `termination` is the init container's.
        return dataclasses.replace(rt, stage="Terminated", termination=ended)
    return dataclasses.replace(
        rt,
        init_runs=(*rt.init_runs[:-1], InitRun(at)),
        init_restart_count=rt.init_restart_count + 1,
        init_last_termination=ended,
    )


def _current_started_at(rt: PodRuntime) -> float | None:
    """When the container a kill would hit started: the app container, else the running init one."""
    if rt.stage == "Initializing":
        return rt.init_runs[-1].started_at
    return rt.container_started_at


def container_exited(rt: PodRuntime, exit_code: int, at: float, policy: RestartPolicy) -> PodRuntime:
    """The container exits with `exit_code` at `at`: restart in place or end the pod, per restartPolicy."""
    if rt.stage != "Running":
        return rt
    ended = Termination.of(exit_code, rt.container_started_at, at)
    if policy == "Always" or (policy == "OnFailure" and exit_code != 0):
        return dataclasses.replace(
            rt, container_started_at=at, restart_count=rt.restart_count + 1, last_termination=ended
        )
    return dataclasses.replace(rt, stage="Terminated", termination=ended)


def stopped(rt: PodRuntime, exit_code: int, at: float) -> PodRuntime:
    """Containers stopped because the pod is being deleted (SIGTERM, then the sim's grace)."""
    if rt.stage == "Terminated":
        return rt
    if rt.stage == "Pending":
        return dataclasses.replace(
            rt,
            stage="Terminated",
            termination=Termination(SIGKILL_EXIT_CODE, "ContainerStatusUnknown", None, at),
        )
    return dataclasses.replace(
        rt, stage="Terminated", termination=Termination.of(exit_code, _current_started_at(rt), at)
    )


def evicted(rt: PodRuntime, message: str, at: float) -> PodRuntime:
    """The kubelet evicted the pod (node pressure): phase Failed, reason Evicted, containers killed."""
    if rt.stage == "Terminated":
        return rt
    ended = Termination(SIGKILL_EXIT_CODE, "Error", _current_started_at(rt), at)
    return dataclasses.replace(rt, stage="Terminated", termination=ended, reason="Evicted", message=message)


def is_ready(rt: PodRuntime, timing: PodTiming, now: float) -> bool:
    if rt.stage != "Running" or timing.never_ready:
        return False
    assert rt.container_started_at is not None
    return now >= rt.container_started_at + timing.ready


def next_deadline(rt: PodRuntime, timing: PodTiming, now: float) -> float | None:
    """The next simulated time at which `advance` or readiness changes something, if any."""
    if rt.stage == "Pending":
        return None if rt.volumes_blocked else rt.created_at + timing.start
    if rt.stage == "Initializing":
        return rt.init_runs[-1].started_at + timing.init
    if rt.stage != "Running":
        return None
    assert rt.container_started_at is not None
    candidates = []
    if timing.run is not None:
        candidates.append(rt.container_started_at + timing.run)
    ready_at = rt.container_started_at + timing.ready
    if not timing.never_ready and ready_at > now:
        candidates.append(ready_at)
    return min(candidates) if candidates else None


# --- status rendering ------------------------------------------------------------------------------


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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _container_id(pod_uid: str, name: str, restart_count: int) -> str:
    return "containerd://" + _digest(f"{pod_uid}/{name}/{restart_count}")


def _terminated(t: Termination, ts: Callable[[float], str], container_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {"exitCode": t.exit_code, "reason": t.reason, "finishedAt": ts(t.finished_at)}
    if t.started_at is not None:
        out["startedAt"] = ts(t.started_at)
        out["containerID"] = container_id
    return out


def _base_status(container: Mapping[str, Any], restart_count: int) -> dict[str, Any]:
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
    cid = _container_id(pod_uid, name, rt.restart_count)
    status = _base_status(container, rt.restart_count)
    status.update(ready=ready, started=rt.stage == "Running")
    if rt.stage in ("Pending", "Initializing") or (rt.container_started_at is None and rt.init_runs):
        # Not created yet, or the pod ended during initialization: app containers never ran.
        status["state"] = {"waiting": {"reason": waiting_reason}}
        return status
    status["containerID"] = cid
    if rt.last_termination is not None:
        prev = _container_id(pod_uid, name, rt.restart_count - 1)
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
    status = _base_status(container, restarts)
    if index >= len(rt.init_runs):
        status["state"] = {"waiting": {"reason": "PodInitializing"}}
        return status
    run = rt.init_runs[index]
    cid = _container_id(pod_uid, "init/" + name, restarts)
    status["containerID"] = cid
    if current and rt.init_last_termination is not None:
        prev = _container_id(pod_uid, "init/" + name, restarts - 1)
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
            # Sidecars are stopped with the pod: SIGKILL on eviction, else SIGTERM and its exit code.
            code = SIGKILL_EXIT_CODE if rt.reason == "Evicted" else timing.termination_exit_code
            ended = Termination.of(code, run.started_at, rt.termination.finished_at)
        else:
            ended = rt.termination
        status["state"] = {"terminated": _terminated(ended, ts, cid)}
    return status


def _incomplete_init(spec: Mapping[str, Any], rt: PodRuntime, timing: PodTiming) -> list[str]:
    """Init containers still holding the pod back: regular ones not completed, sidecars not started."""
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
    """The pod's whole `.status` as the kubelet would report it now (conditions keep their times)."""
    spec = pod.get("spec") or {}
    old = dict(pod.get("status") or {})
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
    not_ready_message = None if terminal else f"containers with unready status: [{' '.join(unready)}]"
    incomplete = _incomplete_init(spec, rt, timing) if rt.container_started_at is None else []
    initialized = not incomplete
    init_message = f"containers with incomplete status: [{' '.join(incomplete)}]" if incomplete else None
    conditions: list[tuple[str, bool, str | None, str | None]] = [
        ("PodReadyToStartContainers", rt.stage in ("Initializing", "Running"), None, None),
        ("Initialized", initialized, None if initialized else "ContainersNotInitialized", init_message),
        ("Ready", ready, None if ready else not_ready_reason, None if ready else not_ready_message),
        ("ContainersReady", ready, None if ready else not_ready_reason, None if ready else not_ready_message),
        ("PodScheduled", True, None, None),
    ]
    if rt.reason == "Evicted":
        conditions.append(("DisruptionTarget", True, "TerminationByKubelet", rt.message))
    own = {c[0] for c in conditions}
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    rendered: list[dict[str, Any]] = []
    for ctype, ok, reason, message in conditions:
        value = "True" if ok else "False"
        prev = previous.get(ctype)
        when = prev.get("lastTransitionTime") if prev and prev.get("status") == value else ts(now)
        cond: dict[str, Any] = {
            "type": ctype,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": when,
        }
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        rendered.append(cond)
    rendered.extend(c for c in old.get("conditions") or [] if c.get("type") not in own)

    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("reason", "message", "podIP", "podIPs")},
        "phase": rt.phase,
        "conditions": rendered,
        "hostIP": placement.host_ip,
        "hostIPs": [{"ip": placement.host_ip}],
        "startTime": ts(rt.created_at),
        "containerStatuses": statuses,
        "qosClass": old.get("qosClass") or qos_class(spec),
    }
    if placement.pod_ip is not None and rt.started_at is not None:
        status["podIP"] = placement.pod_ip
        status["podIPs"] = [{"ip": placement.pod_ip}]
    if has_init:
        status["initContainerStatuses"] = [
            _init_status(uid, i, c, rt, timing, ts) for i, c in enumerate(init_containers)
        ]
    if rt.reason is not None:
        status["reason"] = rt.reason
    if rt.message is not None:
        status["message"] = rt.message
    return status
