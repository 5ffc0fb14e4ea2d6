"""The kubelet's probe workers (pkg/kubelet/prober/worker.go) for one container of the process
runtime: `ContainerProber` runs the specs of probes.py on the kubelet's schedule, each attempt
through prober.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from kubesim.procrt.prober import ExecInContainer, NetnsTransport, Transport, run_probe
from kubesim.procrt.probes import (
    Outcome,
    ProbeEvent,
    ProbeResult,
    ProbeSpec,
    ProbeType,
    container_probes,
    probe_event,
)

log = logging.getLogger(__name__)

MAX_PROBE_RETRIES = 3
"""The kubelet's maxProbeRetries: attempts in a row while an attempt errors."""

Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


Attempt = Callable[[ProbeType, ProbeSpec], Awaitable[ProbeResult]]


class ContainerProber:
    """The kubelet's probe workers (pkg/kubelet/prober/worker.go) for one run of one container.

    The kubelet starts one when the container starts and stops it when the container exits, is
    killed or its pod goes away, so a probe never outlives its container; a restarted container gets
    a new prober (the kubelet's workers likewise start over for a new container ID).

    The schedule: the startup probe alone until it succeeds; then liveness and readiness, each on
    its own task. A probe first runs `initialDelaySeconds` after the container started (time spent
    in the startup probe counts), then every `periodSeconds` after the previous attempt ended.
    `successThreshold` consecutive successes / `failureThreshold` consecutive failures change a
    probe's state; probe errors (`Outcome.ERROR`) are tried three times at once, then recorded and
    thrown away. Time goes through the injected `sleep`, in simulated seconds.

    Callbacks (all optional, synchronous; none runs after `stop()`; one that raises is logged):
    - `on_started()`: the startup probe succeeded, or at once when there is none (the kubelet's
      `containerStatuses[].started`);
    - `on_ready(ready)`: readiness changed. It starts false; with no readiness probe it becomes true
      on `on_started`;
    - `on_liveness_failure(message)`: `failureThreshold` liveness failures in a row; the kubelet
      kills and restarts the container (with the probe's `termination_grace_period_seconds` when
      set). `message` is the kubelet's Killing event text. That probe stops; readiness goes on until
      `stop()`;
    - `on_startup_failure(message)`: the same for the startup probe (default: `on_liveness_failure`,
      the kubelet handles both alike); liveness and readiness never start;
    - `on_event(event)`: each attempt's Unhealthy / ProbeWarning event, as the kubelet records them.
    """

    def __init__(
        self,
        container_name: str,
        probes: Mapping[ProbeType, ProbeSpec],
        *,
        attempt: Attempt,
        sleep: Sleep,
        on_started: Callable[[], None] | None = None,
        on_ready: Callable[[bool], None] | None = None,
        on_liveness_failure: Callable[[str], None] | None = None,
        on_startup_failure: Callable[[str], None] | None = None,
        on_event: Callable[[ProbeEvent], None] | None = None,
    ) -> None:
        self.container_name = container_name
        self.probes = dict(probes)
        self._attempt = attempt
        self._sleep = sleep
        self._on_started = on_started
        self._on_ready = on_ready
        self._on_liveness_failure = on_liveness_failure
        self._on_startup_failure = on_startup_failure or on_liveness_failure
        self._on_event = on_event
        self._ready = False
        self._started = False
        self._launched = False
        self._stopped = False
        self._tasks: dict[ProbeType, asyncio.Task[None]] = {}

    @classmethod
    def start(
        cls,
        container: Mapping[str, Any],
        *,
        pod_ip: str,
        sleep: Sleep,
        netns_path: str | None = None,
        network: Transport | None = None,
        exec_in: ExecInContainer | None = None,
        attempt_seconds: Callable[[int], float] | None = None,
        on_started: Callable[[], None] | None = None,
        on_ready: Callable[[bool], None] | None = None,
        on_liveness_failure: Callable[[str], None] | None = None,
        on_startup_failure: Callable[[str], None] | None = None,
        on_event: Callable[[ProbeEvent], None] | None = None,
    ) -> ContainerProber:
        """Probes a pod-spec container that has just started, from now on (call it on the event
        loop).

        Connections go out of the network namespace at `netns_path` (the runtime's bridge
        namespace), or through `network` (tests); exec probes run through `exec_in`. An attempt is
        bounded by `timeoutSeconds` real seconds (the processes run at real speed), or
        `attempt_seconds(timeoutSeconds)`. Callbacks for a container with no startup probe run
        before this returns.
        """
        if (netns_path is None) == (network is None):
            raise ValueError("give exactly one of netns_path and network")
        transport: Transport = network if network is not None else NetnsTransport(str(netns_path))

        async def attempt(_: ProbeType, spec: ProbeSpec) -> ProbeResult:
            limit = None if attempt_seconds is None else attempt_seconds(spec.timeout_seconds)
            return await run_probe(
                spec, pod_ip=pod_ip, network=transport, exec_in=exec_in, time_limit=limit
            )

        prober = cls(
            str(container.get("name") or ""),
            container_probes(container),
            attempt=attempt,
            sleep=sleep,
            on_started=on_started,
            on_ready=on_ready,
            on_liveness_failure=on_liveness_failure,
            on_startup_failure=on_startup_failure,
            on_event=on_event,
        )
        prober.launch()
        return prober

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def started(self) -> bool:
        return self._started

    @property
    def tasks(self) -> frozenset[asyncio.Task[None]]:
        """The probe loops still running (one per probe type at most)."""
        return frozenset(task for task in self._tasks.values() if not task.done())

    def launch(self) -> None:
        """Starts probing: once, on the event loop, when the container has started."""
        if self._launched or self._stopped:
            raise RuntimeError(f"the prober of container {self.container_name} cannot start again")
        self._launched = True
        startup = self.probes.get(ProbeType.STARTUP)
        if startup is None:
            self._container_started(0.0)
        else:
            self._spawn(ProbeType.STARTUP, startup, 0.0)

    def stop(self) -> None:
        """Cancels every probe at once, an attempt in flight included (the container is gone)."""
        self._stopped = True
        for task in self._tasks.values():
            task.cancel()

    async def wait_stopped(self) -> None:
        """After `stop()`: returns once cancelled attempts have cleaned up (sockets, exec'd
        commands)."""
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def terminating(self) -> None:
        """The pod is being deleted: the kubelet stops the startup and liveness probes (no restart
        in the grace period); readiness goes on until `stop()`."""
        for kind in (ProbeType.STARTUP, ProbeType.LIVENESS):
            task = self._tasks.get(kind)
            if task is not None:
                task.cancel()

    def _container_started(self, since_start: float) -> None:
        self._started = True
        on_started = self._on_started
        if on_started is not None:
            self._call(lambda _: on_started(), None)
        if ProbeType.READINESS not in self.probes:
            self._set_ready(True)
        for kind in (ProbeType.LIVENESS, ProbeType.READINESS):
            spec = self.probes.get(kind)
            if spec is not None:
                self._spawn(kind, spec, since_start)

    def _spawn(self, kind: ProbeType, spec: ProbeSpec, since_start: float) -> None:
        name = f"probe {self.container_name} {kind.value}"
        task = asyncio.get_running_loop().create_task(
            self._probe_loop(kind, spec, since_start), name=name
        )
        task.add_done_callback(_log_crash)
        self._tasks[kind] = task

    async def _probe_loop(self, kind: ProbeType, spec: ProbeSpec, since_start: float) -> None:
        """`since_start`: simulated seconds since the container started, which count towards
        `initialDelaySeconds` (the kubelet measures it from the container's start)."""
        clock = since_start
        delay = spec.initial_delay_seconds - since_start
        if delay > 0:
            await self._sleep(delay)
            clock += delay
        last_ok: bool | None = None
        run = 0
        while True:
            result = await self._attempt_with_retries(kind, spec)
            if self._stopped:
                return
            event = probe_event(kind, result)
            if event is not None and self._on_event is not None:
                self._call(self._on_event, event)
            if result.outcome is not Outcome.ERROR:
                run = run + 1 if result.ok is last_ok else 1
                last_ok = result.ok
                threshold = spec.success_threshold if result.ok else spec.failure_threshold
                if run >= threshold and self._reached(kind, result.ok, clock):
                    return
            await self._sleep(spec.period_seconds)
            clock += spec.period_seconds

    def _reached(self, kind: ProbeType, ok: bool, clock: float) -> bool:
        """Applies a probe's new state; True when that probe is done for this container."""
        if kind is ProbeType.READINESS:
            self._set_ready(ok)
            return False
        if kind is ProbeType.STARTUP and ok:
            self._container_started(clock)
            return True
        if ok:
            return False
        callback = (
            self._on_startup_failure if kind is ProbeType.STARTUP else self._on_liveness_failure
        )
        if callback is not None:
            word = kind.value.lower()
            self._call(
                callback, f"Container {self.container_name} failed {word} probe, will be restarted"
            )
        # The kubelet holds the probe until a new container: no second kill of the same one.
        return True

    async def _attempt_with_retries(self, kind: ProbeType, spec: ProbeSpec) -> ProbeResult:
        result = ProbeResult(Outcome.ERROR, "no attempt")
        for _ in range(MAX_PROBE_RETRIES):
            try:
                result = await self._attempt(kind, spec)
            except Exception as exc:  # an attempt's bug must not end the container's probing
                log.exception("%s probe of container %s raised", kind.value, self.container_name)
                result = ProbeResult(Outcome.ERROR, str(exc) or type(exc).__name__)
            if result.outcome is not Outcome.ERROR:
                break
        return result

    def _set_ready(self, ready: bool) -> None:
        if ready != self._ready and not self._stopped:
            self._ready = ready
            if self._on_ready is not None:
                self._call(self._on_ready, ready)

    def _call(self, callback: Callable[[T], None], arg: T) -> None:
        if self._stopped:
            return
        try:
            callback(arg)
        except Exception:
            log.exception("a probe callback of container %s failed", self.container_name)


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("%s crashed", task.get_name(), exc_info=exc)
