"""What the process runtime knows of each container, and the pod status the kubelet reports from it.

Unlike the timer model, every container has its own life here (its own process, exits and restarts),
so the records are per container; the envelope (conditions with their transition times, addresses,
QoS) is the one `controllers/podstatus.py` renders for both runtimes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesim.controllers import podstatus

State = Literal["waiting", "running", "terminated"]


@dataclass(frozen=True)
class Ended:
    exit_code: int
    reason: str
    started_at: float | None
    finished_at: float
    message: str | None = None

    @classmethod
    def of(cls, code: int, started_at: float | None, finished_at: float) -> Ended:
        return cls(code, "Completed" if code == 0 else "Error", started_at, finished_at)


@dataclass
class ContainerRecord:
    """One container of the pod, as the kubelet tracks it (times are simulated seconds)."""

    name: str
    image: str
    init: bool = False
    sidecar: bool = False
    state: State = "waiting"
    waiting_reason: str = "ContainerCreating"
    waiting_message: str | None = None
    started_at: float | None = None
    ended: Ended | None = None
    last: Ended | None = None
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    """The startup probe passed (or there is none) while running."""

    def running(self, at: float) -> None:
        self.state, self.started_at, self.ended, self.ready, self.started = (
            "running",
            at,
            None,
            False,
            False,
        )

    def terminated(self, ended: Ended) -> None:
        self.state, self.ended, self.ready, self.started = "terminated", ended, False, False

    def waiting(self, reason: str, message: str | None = None) -> None:
        """Waiting to (re)start: the run that ended, if any, becomes lastState."""
        if self.ended is not None:
            self.last, self.ended = self.ended, None
        self.state, self.waiting_reason, self.waiting_message = "waiting", reason, message
        self.ready = self.started = False

    @property
    def succeeded(self) -> bool:
        return self.state == "terminated" and self.ended is not None and self.ended.exit_code == 0


@dataclass
class PodRecord:
    """The pod-level facts: sandbox, address, how it ended."""

    created_at: float
    pod_ip: str | None = None
    sandbox_ready: bool = False
    containers: list[ContainerRecord] = field(default_factory=list)
    init_containers: list[ContainerRecord] = field(default_factory=list)
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None


def _ended(e: Ended, ts: Callable[[float], str], cid: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "exitCode": e.exit_code,
        "reason": e.reason,
        "finishedAt": ts(e.finished_at),
    }
    if e.message:
        out["message"] = e.message
    if e.started_at is not None:
        out["startedAt"] = ts(e.started_at)
        out["containerID"] = cid
    return out


def container_status(
    uid: str, rec: ContainerRecord, container: Mapping[str, Any], ts: Callable[[float], str]
) -> dict[str, Any]:
    prefix = "init/" if rec.init else ""
    cid = podstatus.container_id(uid, prefix + rec.name, rec.restart_count)
    status = podstatus.base_status(container, rec.restart_count)
    # A completed init container reports ready, as the kubelet does (terminated with exit code 0).
    done = rec.init and not rec.sidecar and rec.succeeded
    status.update(ready=rec.ready or done, started=rec.state == "running" and rec.started)
    if rec.last is not None:
        prev = podstatus.container_id(uid, prefix + rec.name, rec.restart_count - 1)
        status["lastState"] = {"terminated": _ended(rec.last, ts, prev)}
    if rec.state == "waiting":
        waiting: dict[str, Any] = {"reason": rec.waiting_reason}
        if rec.waiting_message:
            waiting["message"] = rec.waiting_message
        status["state"] = {"waiting": waiting}
        return status
    status["containerID"] = cid
    if rec.state == "running":
        assert rec.started_at is not None
        status["state"] = {"running": {"startedAt": ts(rec.started_at)}}
    else:
        assert rec.ended is not None
        status["state"] = {"terminated": _ended(rec.ended, ts, cid)}
    return status


def render(
    pod: Mapping[str, Any],
    rec: PodRecord,
    host_ip: str,
    ts: Callable[[float], str],
    now: float,
) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    uid = str((pod.get("metadata") or {}).get("uid", ""))
    by_name = {
        str(c.get("name", "")): c
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    }
    statuses = sorted(
        (container_status(uid, r, by_name.get(r.name, {}), ts) for r in rec.containers),
        key=lambda s: s["name"],
    )
    init_statuses = [
        container_status(uid, r, by_name.get(r.name, {}), ts) for r in rec.init_containers
    ]
    terminal = rec.phase in ("Succeeded", "Failed")
    ready = not terminal and bool(rec.containers) and all(r.ready for r in rec.containers)
    ready = ready and all(r.ready for r in rec.init_containers if r.sidecar)
    unready = [s["name"] for s in statuses if not s["ready"]]
    why = "PodCompleted" if terminal else "ContainersNotReady"
    text = None if terminal else f"containers with unready status: [{' '.join(unready)}]"
    incomplete = [r.name for r in rec.init_containers if not _init_done(r)]
    init_text = (
        f"containers with incomplete status: [{' '.join(incomplete)}]" if incomplete else None
    )
    conditions: list[podstatus.Condition] = [
        ("PodReadyToStartContainers", rec.sandbox_ready, None, None),
        (
            "Initialized",
            not incomplete,
            None if not incomplete else "ContainersNotInitialized",
            init_text,
        ),
        ("Ready", ready, None if ready else why, None if ready else text),
        ("ContainersReady", ready, None if ready else why, None if ready else text),
        ("PodScheduled", True, None, None),
    ]
    if rec.reason == "Evicted":
        conditions.append(("DisruptionTarget", True, "TerminationByKubelet", rec.message))
    return podstatus.pod_status(
        pod,
        phase=rec.phase,
        conditions=conditions,
        placement=podstatus.Placement(host_ip, rec.pod_ip),
        start_time=ts(rec.created_at),
        container_statuses=statuses,
        init_statuses=init_statuses if rec.init_containers else None,
        reason=rec.reason,
        message=rec.message,
        now=ts(now),
    )


def _init_done(r: ContainerRecord) -> bool:
    if r.sidecar:
        return r.state == "running" and r.started
    return r.succeeded


def phase(rec: PodRecord, policy: str, stopping: bool) -> str:
    """The kubelet's pod phase from the container records (`stopping`: the pod is being deleted)."""
    if rec.reason == "Evicted":
        return "Failed"
    if any(
        r.state == "terminated" and not r.succeeded and policy == "Never"
        for r in rec.init_containers
        if not r.sidecar
    ):
        return "Failed"
    if not all(
        _init_done(r) or (r.sidecar and r.state != "waiting") for r in rec.init_containers
    ) and not any(r.state != "waiting" or r.last is not None for r in rec.containers):
        return "Pending"
    apps: Sequence[ContainerRecord] = rec.containers
    if not any(r.state != "waiting" or r.last is not None for r in apps):
        return "Pending"
    if any(r.state == "running" for r in apps):
        return "Running"
    done = [r for r in apps if r.state == "terminated"]
    if len(done) < len(apps):
        return "Running"  # some container is waiting to be restarted
    failed = any(not r.succeeded for r in done)
    if stopping or policy == "Never" or (policy == "OnFailure" and not failed):
        return "Failed" if failed else "Succeeded"
    return "Running"
