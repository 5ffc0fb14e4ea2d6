"""Pure pod lifecycle of the simulated kubelet: annotations + times + restartPolicy -> pod status.

No I/O and no clock: the kubelet (`kubelet.py`) keeps one `PodRuntime` per pod, calls `advance` with
simulated seconds, and writes what `podstatus.render_status` makes of it. Stages: Pending ->
Initializing (init containers one at a time; sidecars keep running) -> Running (Ready after
`ready-seconds`) -> Succeeded or Failed. An exit that restartPolicy restarts (Always, or OnFailure
with a non-zero code) restarts the container in place, without a CrashLoopBackOff delay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
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
# A pod whose run-seconds is ~0 under restartPolicy Always would otherwise restart forever in one
# call.
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


def is_exit_code(code: int) -> bool:
    """Whether `containerStatuses[].state.terminated.exitCode` (an int32) can hold `code`."""
    return -(2**31) <= code < 2**31


def _exit_code(value: str | None, default: int) -> int:
    """An exit code annotation; one that is not an exit code reads as the default, like one that is
    not a number."""
    code = _int(value, default)
    return code if is_exit_code(code) else default


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
        """`min_run` bounds how fast a crashing container can restart (no busy loop on run-seconds
        0)."""
        run = _optional_seconds(annotations.get(RUN_SECONDS))
        init = _seconds(annotations.get(INIT_SECONDS), DEFAULT_INIT_SECONDS)
        init_exit_code = _exit_code(annotations.get(INIT_EXIT_CODE), 0)
        return cls(
            start=_seconds(annotations.get(START_SECONDS), start_default),
            ready=_seconds(annotations.get(READY_SECONDS), ready_default),
            run=None if run is None else max(run, min_run),
            exit_code=_exit_code(annotations.get(EXIT_CODE), 0),
            never_ready=annotations.get(READY, "").lower() == "false",
            termination=_seconds(annotations.get(TERMINATION_SECONDS), DEFAULT_TERMINATION_SECONDS),
            termination_exit_code=_exit_code(
                annotations.get(TERMINATION_EXIT_CODE), SIGTERM_EXIT_CODE
            ),
            # Only a failing init container restarts, so only then does it need the floor.
            init=init if init_exit_code == 0 else max(init, min_run),
            init_exit_code=init_exit_code,
            init_sidecars=tuple(is_sidecar(c) for c in init_containers),
        )


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """A restartable init container (KEP-753): started in order, then kept running beside the
    others."""
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
    """The latest run of one init container; a sidecar's `finished_at` stays None while the pod
    lives."""

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
    """One entry per init container started so far, in spec order; the last one is the one
    running."""
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
    """Applies every transition due at or before `now` (start, init containers, exits, restarts),
    each at its due time."""
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


def _init_container_exited(
    rt: PodRuntime, timing: PodTiming, at: float, policy: RestartPolicy
) -> PodRuntime:
    current = rt.init_runs[-1]
    code = timing.init_exit_code
    if code == 0:
        done = (*rt.init_runs[:-1], InitRun(current.started_at, at))
        reset = dataclasses.replace(
            rt, init_runs=done, init_restart_count=0, init_last_termination=None
        )
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


def container_exited(
    rt: PodRuntime, exit_code: int, at: float, policy: RestartPolicy
) -> PodRuntime:
    """The container exits with `exit_code` at `at`: restart in place or end the pod, per
    restartPolicy."""
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


NODE_LOST_EXIT_CODE = 255
"""What the runtime reports, with reason `Unknown`, for a container that died with its node."""


def node_restarted(rt: PodRuntime, died_at: float, now: float, policy: RestartPolicy) -> PodRuntime:
    """The node came back after its containers died with it at `died_at`: the running container
    (app or init) ended with 255, reason Unknown; restartPolicy restarts it `now` or ends the
    pod."""
    if rt.stage not in ("Initializing", "Running"):
        return rt
    ended = Termination(NODE_LOST_EXIT_CODE, "Unknown", _current_started_at(rt), died_at)
    if policy == "Never":
        return dataclasses.replace(rt, stage="Terminated", termination=ended)
    if rt.stage == "Initializing":
        return dataclasses.replace(
            rt,
            init_runs=(*rt.init_runs[:-1], InitRun(now)),
            init_restart_count=rt.init_restart_count + 1,
            init_last_termination=ended,
        )
    return dataclasses.replace(
        rt, container_started_at=now, restart_count=rt.restart_count + 1, last_termination=ended
    )


def evicted(rt: PodRuntime, message: str, at: float) -> PodRuntime:
    """The kubelet evicted the pod (node pressure): phase Failed, reason Evicted, containers
    killed."""
    if rt.stage == "Terminated":
        return rt
    ended = Termination(SIGKILL_EXIT_CODE, "Error", _current_started_at(rt), at)
    return dataclasses.replace(
        rt, stage="Terminated", termination=ended, reason="Evicted", message=message
    )


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
