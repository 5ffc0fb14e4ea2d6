"""The kubelet of the process runtime: pods whose containers are real programs in Linux namespaces.

It keeps the timer kubelet's contract towards the rest of kubesim (the node object, the work queue
fed by pod events, `evict` / `kill` and their HTTP routes, status through the status subresource,
deletion with grace 0 once the containers are gone) and replaces the simulated lifecycle with one
`PodWorker` per pod. It owns what is shared by the pods: the state directory, the bridge namespace,
the cluster DNS served at the gateway address, and the stand-in images.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesim import devices, errors
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none
from kubesim.controllers.kubelet import POD_NETWORK, Kubelet, PodKey
from kubesim.procrt import containerspec, hostsfiles, logs, missing_requirements, netns, volumefiles
from kubesim.procrt.containers import BindMount, ContainerRun, RunSpec
from kubesim.procrt.dns import DNSServer
from kubesim.procrt.dnsrecords import ClusterDNS
from kubesim.procrt.podworker import ConfigError, PodWorker, ProbeHandle
from kubesim.procrt.probes import ProbeType, container_probes
from kubesim.procrt.probeworker import ContainerProber
from kubesim.procrt.sandbox import Holder, PodNetwork, SandboxError, StateDir
from kubesim.procrt.status import ContainerRecord, render

if TYPE_CHECKING:
    from aiohttp import web

    from kubesim.clock import Clock
    from kubesim.cluster import Cluster
    from kubesim.controllers.volumes import VolumeManager
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

MOUNT_RETRY_SECONDS = 1.0
RESTART_BACKOFF_SECONDS = 10.0
LOGS = "logs"
"""The folder of a pod's directory with its containers' CRI log files."""


class ProcessKubelet(Kubelet):
    """The node's kubelet when `SimSettings.runtime == "process"`."""

    def __init__(
        self, cluster: Cluster, settings: SimSettings, clock: Clock, volumes: VolumeManager
    ) -> None:
        super().__init__(cluster, settings, clock, volumes)
        self.clock = clock
        self.restart_backoff_seconds = RESTART_BACKOFF_SECONDS
        self._workers: dict[PodKey, PodWorker] = {}
        self._cleanups: set[asyncio.Task[None]] = set()
        self._state: StateDir | None = None
        self._network = PodNetwork(POD_NETWORK)
        self.dns = ClusterDNS(cluster, settings.cluster_domain)
        self._dns_server: DNSServer | None = None
        self._host_passwd = Path("/etc/passwd").read_text()
        self._host_group = Path("/etc/group").read_text()
        self._visible: dict[tuple[PodKey, str], str | None] = {}
        """NVIDIA_VISIBLE_DEVICES each container was started with (None: unset)."""
        volumes.add_sync_listener(self._volumes_synced)

    # --- life of the runtime ----------------------------------------------------------------------
    async def run(self) -> None:
        problem = missing_requirements()
        if problem is not None:
            raise SandboxError(problem)
        self._state = StateDir()
        try:
            await self._network.start()
            udp = netns.socket_in_netns(self._network.netns, socket.AF_INET, socket.SOCK_DGRAM)
            tcp = netns.socket_in_netns(self._network.netns, socket.AF_INET, socket.SOCK_STREAM)
            udp.bind((self._network.gateway, 53))
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind((self._network.gateway, 53))
            self._dns_server = DNSServer(self.dns, udp, tcp)
            await self._dns_server.start()
            await super().run()
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        workers = list(self._workers.values())
        for worker in workers:
            worker.task.cancel()
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker.task
            if worker.sandbox is not None:
                await worker.sandbox.stop()
        self._workers.clear()
        await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._dns_server is not None:
            await self._dns_server.close()
        await self._network.stop()
        if self._state is not None:
            self._state.close()

    def on_change(
        self, event: Any, rt: Any, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        self.dns.on_change(event, rt, obj, old)
        super().on_change(event, rt, obj, old)

    def routes(self) -> list[web.RouteDef]:
        return [*logs.routes(self._cluster, self._pods_rt, self.log_dir), *super().routes()]

    # --- the work queue ---------------------------------------------------------------------------
    def _sync(self, key: PodKey) -> None:
        worker = self._workers.get(key)
        pod = self._assigned_pod(key, worker.uid if worker else None)
        if pod is None or (self._rejected and self._rejected_pod(key, pod)):
            return
        uid = str(pod["metadata"].get("uid", ""))
        if worker is not None and worker.uid != uid:
            self._forget(key, worker.uid)
            worker = None
        if worker is None:
            # Nothing of a pod runs here without a worker (its node came back, or it was deleted
            # before it started): a terminating one is finished, never started again.
            if pod["metadata"].get("deletionTimestamp"):
                self._delete(key)
                return
            self.events.scheduled(pod)
            terminal = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if not terminal and not self._admit_devices(key, pod):
                return
            self._workers[key] = PodWorker(self, pod)
            return
        worker.update(pod)

    def _forget(self, key: PodKey, uid: str) -> None:
        worker = self._workers.get(key)
        if worker is not None and worker.uid == uid:
            del self._workers[key]
            self.devices.release(key)
            for rec in [*worker.record.init_containers, *worker.record.containers]:
                self._visible.pop((key, rec.name), None)
            self._stop_worker(worker)
        super()._forget(key, uid)

    def _stop_worker(self, worker: PodWorker) -> None:
        worker.task.cancel()
        cleanup = asyncio.get_running_loop().create_task(self._cleanup(worker))
        self._cleanups.add(cleanup)
        cleanup.add_done_callback(self._cleanups.discard)

    def _node_lost(self, key: PodKey) -> None:
        """The pod's processes die with its node; nothing is published (the worker is dropped
        first). Once the node is up, the pod starts again in a new sandbox."""
        super()._node_lost(key)
        worker = self._workers.pop(key, None)
        if worker is not None:
            self._stop_worker(worker)

    def _node_restarted(self, key: PodKey, died_at: float) -> None:
        """Nothing to carry over: `_sync` gives the pod a new worker."""

    async def _cleanup(self, worker: PodWorker) -> None:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker.task
        if worker.sandbox is not None:
            await worker.sandbox.stop()
        self._ips.release(worker.record.pod_ip)
        with contextlib.suppress(volumefiles.VolumeError, OSError):
            volumefiles.teardown(self.pod_dir(worker))
        shutil.rmtree(self.pod_dir(worker), ignore_errors=True)

    def evict(
        self, namespace: str, name: str, message: str = "The node was low on resource: memory."
    ) -> None:
        self._worker(namespace, name).evict(message)

    def kill(self, namespace: str, name: str, exit_code: int = 137) -> None:
        """SIGKILL to the app containers (a real process cannot be made to exit with a chosen
        code)."""
        self._worker(namespace, name).kill()

    def _worker(self, namespace: str, name: str) -> PodWorker:
        self._sync((namespace, name))
        worker = self._workers.get((namespace, name))
        if worker is None:
            raise errors.not_found("pods", "", name)
        return worker

    # --- what a pod worker asks of its kubelet ----------------------------------------------------
    def pod_dir(self, worker: PodWorker) -> Path:
        assert self._state is not None
        return self._state.path / "pods" / worker.uid

    def log_dir(self, namespace: str, name: str, uid: str) -> Path | None:
        """The pod's `<container>/<restart>.log` files; None before the runtime runs."""
        if self._state is None:
            return None
        return self._state.path / "pods" / uid / LOGS

    def publish(self, worker: PodWorker) -> None:
        if self._workers.get(worker.key) is not worker:
            return
        if worker.record.phase in ("Succeeded", "Failed"):
            self.devices.release(worker.key)  # every container has exited
        pod = get_or_none(self._cluster, self._pods_rt, *worker.key)
        if pod is None or str(pod["metadata"].get("uid", "")) != worker.uid:
            return
        status = render(
            pod, worker.record, self.host_ip(pod), self._clock.timestamp, self._clock.now()
        )
        if status != pod.get("status"):
            try:
                self._cluster.update(
                    self._pods_rt, *worker.key, {**pod, "status": status}, subresource="status"
                )
            except errors.StatusError as err:
                log.debug("kubesim process runtime: status of %s/%s: %s", *worker.key, err)

    async def start_sandbox(self, worker: PodWorker) -> Holder | None:
        """The pod's sandbox, once its volumes can be set up; retried (ContainerCreating, the reason
        in the container's waiting message) as the kubelet does, until the pod is deleted."""
        pod_dir = self.pod_dir(worker)
        while True:
            problem = self._volumes.mount_problem(worker.pod)
            if problem is not None:
                self.events.failed_mount(worker.pod, problem)
            else:
                try:
                    (pod_dir / LOGS).mkdir(parents=True, exist_ok=True)
                    volumefiles.setup(worker.pod, pod_dir)
                    tmpfs = volumefiles.pod_tmpfs(worker.pod, pod_dir / "volumes")
                    break
                except (volumefiles.VolumeError, OSError) as err:
                    problem = str(err)
            for rec in [*worker.record.init_containers, *worker.record.containers]:
                rec.waiting(
                    "ContainerCreating",
                    problem
                    if problem.startswith("MountVolume")
                    else f"MountVolume.SetUp failed: {problem}",
                )
            self.publish(worker)
            await worker.until(MOUNT_RETRY_SECONDS)
            if worker.deleting.is_set():
                return None
        holder = await Holder.start(
            hostsfiles.hostname(worker.pod, self._settings.cluster_domain), tmpfs
        )
        worker.sandbox = holder
        ip = self._ips.allocate()
        worker.record.pod_ip = ip
        await self._network.attach(holder, ip)
        self._volumes.pod_started(worker.pod)
        return holder

    async def stop_sandbox(self, worker: PodWorker) -> None:
        self._volumes.pod_stopped(*worker.key)
        if self._workers.get(worker.key) is worker:
            self.devices.release(worker.key)
        if worker.sandbox is not None:
            await worker.sandbox.stop()

    async def pod_done(self, worker: PodWorker) -> None:
        if worker.deleting.is_set():
            self._delete(worker.key)

    def _delete(self, key: PodKey) -> None:
        with contextlib.suppress(errors.StatusError):
            self._cluster.delete(self._pods_rt, *key, options=DeleteOptions(grace_period_seconds=0))

    def visible_devices_value(
        self, key: PodKey, container: Mapping[str, Any], allocated: tuple[str, ...]
    ) -> str | None:
        """What the container was started with; before it starts, what it would get."""
        name = str(container.get("name", ""))
        if (key, name) in self._visible:
            return self._visible[(key, name)]
        return super().visible_devices_value(key, container, allocated)

    def _volumes_synced(self, key: PodKey, pod: Mapping[str, Any], files: Any) -> None:
        worker = self._workers.get(key)
        if worker is not None and self._state is not None:
            volumefiles.refresh(pod, self.pod_dir(worker), files)

    def run_spec(
        self, worker: PodWorker, container: Mapping[str, Any], rec: ContainerRecord
    ) -> RunSpec:
        pod = worker.pod
        image = self._settings.images.get(str(container.get("image", "")))
        allocated = self.devices.allocation(worker.key).get(rec.name) or ()
        try:
            spec = containerspec.resolve(
                pod,
                container,
                image,
                host_passwd=self._host_passwd,
                host_group=self._host_group,
                lookup=self._volumes.lookup(worker.key[0]),
                pod_ip=worker.record.pod_ip or "",
                host_ip=self.host_ip(pod),
                node_name=str(pod["spec"].get("nodeName") or self._settings.node_name),
                cluster_domain=self._settings.cluster_domain,
                device_env=devices.plugin_env(allocated),
            )
            self._visible[(worker.key, rec.name)] = dict(spec.env).get(devices.VISIBLE_DEVICES)
            volumes_root = self.pod_dir(worker) / "volumes"
            plan = volumefiles.prepare_container(pod, container, volumes_root, env=dict(spec.env))
        except containerspec.ContainerConfigError as err:
            raise ConfigError(err.reason, err.message) from err
        except volumefiles.VolumeError as err:
            raise ConfigError("CreateContainerConfigError", str(err)) from err
        for reason, message in spec.warnings:
            self.events.container_event(pod, rec.name, "Warning", reason, message, init=rec.init)
        assert worker.sandbox is not None
        assert worker.record.pod_ip is not None
        files = {
            "/etc/hosts": hostsfiles.etc_hosts(
                pod, worker.record.pod_ip, self._settings.cluster_domain
            ),
            "/etc/resolv.conf": hostsfiles.resolv_conf(
                pod, self._network.gateway, self._settings.cluster_domain
            ),
            "/etc/hostname": hostsfiles.hostname(pod, self._settings.cluster_domain) + "\n",
            "/etc/passwd": spec.passwd,
            "/etc/group": spec.group,
        }
        for m in plan:
            files.pop(m.target, None)
        run_dir = self.pod_dir(worker) / "containers" / f"{rec.name}-{rec.restart_count}"
        return RunSpec(
            sandbox_pid=worker.sandbox.pid,
            scratch=run_dir,
            log=self.pod_dir(worker) / LOGS / rec.name / f"{rec.restart_count}.log",
            argv=spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            uid=spec.uid,
            gid=spec.gid,
            groups=spec.groups,
            image_root=image.root,
            files=files,
            mounts=[
                BindMount(
                    source=str(volumefiles.volume_dir(volumes_root, m.volume) / m.sub_path)
                    if m.source is None
                    else str(m.source),
                    target=m.target,
                    read_only=m.read_only,
                    is_file=m.is_file,
                    create=m.source is None,
                )
                for m in plan
            ],
        )

    def probe(
        self,
        worker: PodWorker,
        container: Mapping[str, Any],
        rec: ContainerRecord,
        run: ContainerRun,
    ) -> ProbeHandle:
        def on_ready(ready: bool) -> None:
            rec.ready = ready
            worker.notify()
            self.publish(worker)

        def on_started() -> None:
            rec.started = True
            worker.notify()
            self.publish(worker)

        specs = container_probes(container)

        def on_failure(kind: ProbeType) -> Callable[[str], None]:
            # The probe's own terminationGracePeriodSeconds, when it has one, beats the pod's.
            spec = specs.get(kind)
            grace = None if spec is None else spec.termination_grace_period_seconds

            def kill(message: str) -> None:
                log.info(
                    "kubesim process runtime: %s/%s %s: %s; restarting",
                    *worker.key,
                    rec.name,
                    message,
                )
                self.events.killing(worker.pod, rec.name, init=rec.init, message=message)
                worker.spawn(worker.terminate([run], None if grace is None else float(grace)))

            return kill

        return ContainerProber.start(
            container,
            pod_ip=worker.record.pod_ip or "",
            netns_path=self._network.netns,
            exec_in=run.exec,
            sleep=lambda s: asyncio.sleep(self._clock.real_delay(s)),
            on_ready=on_ready,
            on_started=on_started,
            on_liveness_failure=on_failure(ProbeType.LIVENESS),
            on_startup_failure=on_failure(ProbeType.STARTUP),
            on_event=lambda event: self.events.container_event(
                worker.pod, rec.name, event.type, event.reason, event.message, init=rec.init
            ),
        )
