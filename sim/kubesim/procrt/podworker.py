"""One pod's life in the process runtime, as the kubelet's pod worker runs it.

Sandbox first (namespaces, pod IP, volumes), then the init containers one at a time (a sidecar is
started and left running once its startup probe passes), then every app container under its own
supervisor, which restarts it per `restartPolicy` with the kubelet's back-off (10 s doubling to 5
min, reset after 10 min of running). Deletion stops the app containers with SIGTERM, then the
sidecars, waits the grace period, then SIGKILL. Exit codes, restarts and readiness come from the
real processes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kubesim.procrt.containers import START_ERROR_EXIT_CODE, ContainerRun, RunSpec
from kubesim.procrt.sandbox import Holder
from kubesim.procrt.status import ContainerRecord, Ended, PodRecord, phase

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.controllers.podevents import PodEvents

log = logging.getLogger(__name__)

BACKOFF_MAX_SECONDS = 300.0
BACKOFF_RESET_SECONDS = 600.0
DEFAULT_GRACE_SECONDS = 30.0


class ProbeHandle(Protocol):
    def stop(self) -> None: ...

    def terminating(self) -> None:
        """The pod is being deleted: no more startup or liveness restarts."""
        ...


class Host(Protocol):
    """What a pod worker needs from its kubelet."""

    clock: Clock
    restart_backoff_seconds: float
    events: PodEvents

    def publish(self, worker: PodWorker) -> None: ...

    async def start_sandbox(self, worker: PodWorker) -> Holder | None:
        """None: the pod was deleted before its sandbox could start."""
        ...

    async def stop_sandbox(self, worker: PodWorker) -> None: ...

    def run_spec(
        self, worker: PodWorker, container: Mapping[str, Any], rec: ContainerRecord
    ) -> RunSpec:
        """Raises ContainerConfigError (reason, message) when the container cannot be configured
        yet."""
        ...

    def probe(
        self,
        worker: PodWorker,
        container: Mapping[str, Any],
        rec: ContainerRecord,
        run: ContainerRun,
    ) -> ProbeHandle: ...

    async def pod_done(self, worker: PodWorker) -> None: ...


class ConfigError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


class PodWorker:
    def __init__(self, host: Host, pod: dict[str, Any]) -> None:
        self.host = host
        self.pod = pod
        meta = pod["metadata"]
        self.key = (str(meta.get("namespace", "")), str(meta["name"]))
        self.uid = str(meta.get("uid", ""))
        spec = pod.get("spec") or {}
        self.policy = str(spec.get("restartPolicy") or "Always")
        self.record = PodRecord(
            created_at=host.clock.now(),
            containers=[
                ContainerRecord(str(c["name"]), str(c.get("image", "")))
                for c in spec.get("containers") or []
            ],
            init_containers=[
                ContainerRecord(
                    str(c["name"]), str(c.get("image", "")), init=True, sidecar=_is_sidecar(c)
                )
                for c in spec.get("initContainers") or []
            ],
        )
        self.sandbox: Holder | None = None
        self.runs: dict[str, ContainerRun] = {}
        self.deleting = asyncio.Event()
        self.ended = asyncio.Event()
        self._wake = asyncio.Event()
        self._evicted = False
        self._sidecars: list[asyncio.Task[None]] = []
        self._probers: dict[str, ProbeHandle] = {}
        self._finishing = False
        self._children: list[asyncio.Task[None]] = []
        self.task: asyncio.Task[None] = asyncio.create_task(
            self._run(), name=f"kubesim-pod-{self.key[0]}/{self.key[1]}"
        )

    # --- what the kubelet calls ------------------------------------------------------------------
    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp") is not None and not self.deleting.is_set():
            self.deleting.set()
            for prober in self._probers.values():
                prober.terminating()
        self._wake.set()

    def kill(self) -> None:
        """Node-level kill: every app container dies with SIGKILL; restartPolicy decides what
        follows."""
        for rec in self.record.containers:
            run = self.runs.get(rec.name)
            if run is not None:
                run.kill()

    def evict(self, message: str) -> None:
        self._evicted = True
        self.record.reason, self.record.message = "Evicted", message
        self.host.events.evicted(self.pod, message)
        for rec, run in self._running():
            self.host.events.killing(self.pod, rec.name, init=rec.init)
            run.kill()
        self._wake.set()

    @property
    def grace_seconds(self) -> float:
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (self.pod.get("spec") or {}).get(
                "terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS
            )
        return float(grace)

    # --- the life ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            if await self._start_sandbox() and await self._run_init_containers():
                await self._run_app_containers()
            elif not self.deleting.is_set() and not self._evicted:
                self._set_phase()
        except asyncio.CancelledError:
            await self._kill_everything()
            raise
        except Exception:
            log.exception("kubesim process runtime: pod %s/%s failed", *self.key)
            for run in self.runs.values():
                run.kill()
        finally:
            self.ended.set()
        await self.host.stop_sandbox(self)
        self._set_phase()
        await self.host.pod_done(self)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task of this pod's (a liveness restart): cancelled with the pod."""
        return self._child(coro)

    def _child(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._children.append(task)
        return task

    async def _kill_everything(self) -> None:
        """The kubelet is going away: no container, probe or supervisor of this pod may outlive
        it."""
        for task in self._children:
            task.cancel()
        for run in self.runs.values():
            run.kill()
        await asyncio.gather(
            *self._children, *(r.wait() for r in self.runs.values()), return_exceptions=True
        )

    def _set_phase(self) -> None:
        self.record.phase = phase(self.record, self.policy, self.deleting.is_set())
        self.host.publish(self)

    async def until(self, seconds: float) -> None:
        """Waits `seconds` (simulated) or until the pod is being deleted or evicted."""
        stop = asyncio.ensure_future(self.deleting.wait())
        try:
            await asyncio.wait({stop}, timeout=self.host.clock.real_delay(seconds))
        finally:
            stop.cancel()

    async def _start_sandbox(self) -> bool:
        self.sandbox = await self.host.start_sandbox(self)
        if self.sandbox is None:
            return False
        self.record.sandbox_ready = True
        self.host.publish(self)
        return True

    async def _run_init_containers(self) -> bool:
        spec = self.pod.get("spec") or {}
        for container, rec in zip(
            spec.get("initContainers") or [], self.record.init_containers, strict=True
        ):
            if rec.sidecar:
                self._sidecars.append(self._child(self._supervise(container, rec)))
                while not (rec.state == "running" and rec.started):
                    if self.deleting.is_set() or self._evicted:
                        return False
                    await self._changed()
                continue
            backoff = self.host.restart_backoff_seconds
            while True:
                if self.deleting.is_set() or self._evicted:
                    return False
                code = await self._run_once(container, rec)
                if code == 0:
                    break
                if self.policy == "Never":
                    return False
                rec.waiting("CrashLoopBackOff", self._backoff_message(rec, backoff))
                self.host.events.back_off(self.pod, rec.name, init=True)
                self.host.publish(self)
                await self.until(backoff)
                rec.restart_count += 1
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
        return True

    async def _changed(self) -> None:
        self._wake.clear()
        stop = asyncio.ensure_future(self.deleting.wait())
        wake = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({stop, wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            wake.cancel()

    def notify(self) -> None:
        """Something the worker may wait on changed (a probe result)."""
        self._wake.set()

    async def _run_app_containers(self) -> None:
        spec = self.pod.get("spec") or {}
        supervisors = [
            self._child(self._supervise(c, rec))
            for c, rec in zip(spec.get("containers") or [], self.record.containers, strict=True)
        ]
        done: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*supervisors))
        # Cancelled with the pod worker, the gathering future ends with an error nobody else reads.
        done.add_done_callback(lambda f: f.cancelled() or f.exception())
        stop: asyncio.Future[Any] = asyncio.ensure_future(self.deleting.wait())
        try:
            await asyncio.wait([done, stop], return_when=asyncio.FIRST_COMPLETED)
            if not done.done():
                await self._stop_all()
                await done
        finally:
            # also when the worker is cancelled (kubelet shutdown): the wait must not outlive it
            stop.cancel()
        await self._stop_sidecars()

    async def _stop_all(self) -> None:
        apps = [self.runs[r.name] for r in self.record.containers if r.name in self.runs]
        for rec, _run in self._running():
            if not rec.init:
                self.host.events.killing(self.pod, rec.name)
        await self.terminate(apps)

    def _running(self) -> list[tuple[ContainerRecord, ContainerRun]]:
        """The containers with a live process, init containers (sidecars) first."""
        out = []
        for rec in [*self.record.init_containers, *self.record.containers]:
            run = self.runs.get(rec.name)
            if run is not None and run.running:
                out.append((rec, run))
        return out

    async def _stop_sidecars(self) -> None:
        # The app containers are done: sidecars stop now and are not restarted (KEP-753).
        self._finishing = True
        for rec in reversed(self.record.init_containers):
            run = self.runs.get(rec.name)
            if rec.sidecar and run is not None and run.running:
                self.host.events.killing(self.pod, rec.name, init=True)
                await self.terminate([run])
        for task in self._sidecars:
            await task

    async def terminate(self, runs: list[ContainerRun], grace: float | None = None) -> None:
        """SIGTERM, the grace period (default: the pod's), SIGKILL to what still runs."""
        running = [r for r in runs if r.running]
        for run in running:
            run.signal(signal.SIGTERM)
        if not running:
            return
        waits = [asyncio.ensure_future(r.wait()) for r in running]
        seconds = self.grace_seconds if grace is None else grace
        _, pending = await asyncio.wait(waits, timeout=self.host.clock.real_delay(seconds))
        for run in running:
            if run.running:
                run.kill()
        if pending:
            await asyncio.gather(*pending)

    def _restarts(self, code: int) -> bool:
        if self.deleting.is_set() or self._evicted:
            return False
        return self.policy == "Always" or (self.policy == "OnFailure" and code != 0)

    async def _supervise(self, container: Mapping[str, Any], rec: ContainerRecord) -> None:
        backoff = self.host.restart_backoff_seconds
        while True:
            started = self.host.clock.now()
            code = await self._run_once(container, rec)
            sidecar_lives = rec.sidecar and not (
                self.deleting.is_set() or self._evicted or self._finishing
            )
            if not (self._restarts(code) or sidecar_lives):
                self._set_phase()
                return
            if self.host.clock.now() - started > BACKOFF_RESET_SECONDS:
                backoff = self.host.restart_backoff_seconds
            rec.waiting("CrashLoopBackOff", self._backoff_message(rec, backoff))
            if code != 0:
                self.host.events.back_off(self.pod, rec.name, init=rec.init)
            self._set_phase()
            await self.until(backoff)
            if self.deleting.is_set() or self._evicted:
                return
            rec.restart_count += 1
            backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)

    def _backoff_message(self, rec: ContainerRecord, backoff: float) -> str:
        pod = f"{self.key[1]}_{self.key[0]}({self.uid})"
        return f"back-off {backoff:g}s restarting failed container={rec.name} pod={pod}"

    async def _run_once(self, container: Mapping[str, Any], rec: ContainerRecord) -> int:
        """One run of the container: configured, started, probed, waited for; returns its exit
        code."""
        while True:
            try:
                spec = self.host.run_spec(self, container, rec)
                break
            except ConfigError as err:
                rec.waiting(err.reason, err.message)
                self.host.events.failed(self.pod, rec.name, err.reason, err.message, init=rec.init)
                self.host.publish(self)
                await self.until(1.0)
                if self.deleting.is_set() or self._evicted:
                    return START_ERROR_EXIT_CODE
        events = self.host.events
        events.pulled(self.pod, rec.name, init=rec.init)
        run = await ContainerRun.start(spec)
        self.runs[rec.name] = run
        now = self.host.clock.now()
        if run.error is not None:
            events.failed(self.pod, rec.name, "StartError", run.error, init=rec.init)
            code = await run.wait()
            rec.terminated(Ended(code, "StartError", None, now, run.error))
            self.host.publish(self)
            return code
        events.created(self.pod, rec.name, init=rec.init)
        events.container_started(self.pod, rec.name, init=rec.init)
        rec.running(now)
        prober = self.host.probe(self, container, rec, run)
        self._probers[rec.name] = prober
        if self.deleting.is_set():
            prober.terminating()
        self._set_phase()
        try:
            code = await run.wait()
        finally:
            prober.stop()
            self._probers.pop(rec.name, None)
        rec.terminated(Ended.of(code, rec.started_at, self.host.clock.now()))
        if self._evicted:
            rec.ended = Ended(code, "Error", rec.started_at, self.host.clock.now())
        self._set_phase()
        return code
