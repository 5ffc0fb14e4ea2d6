"""The kubelets of the cluster's nodes, one loop for all: runs pods' lifecycles, reports status.

It keeps a `PodRuntime` (`podstate.py`) per pod bound to an existing node, wakes on pod events and
on timers (one pending timer per pod), and writes `.status` through the status subresource only
when it changed. A deleted pod has its containers stopped after min(deletionGracePeriodSeconds,
`kubesim/termination-seconds`), is moved to a terminal phase, then deleted with grace 0. GPUs are
allocated at admission (`kubesim.devices`), listed at `GET /kubesim/v1/nodes/{node}/podresources`.

Tests drive node faults through `evict()`, `kill()`, `node_down()`, `node_up()`, or over HTTP:
`POST .../pods/{pod}/evict` (`{"message": ...}`), `.../kill` (`{"exitCode": N}`, default 137) and
`POST /kubesim/v1/nodes/{node}/down` or `.../up`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from kubesim import devices, errors, nodes
from kubesim.clock import Clock
from kubesim.cluster import DeleteOptions
from kubesim.controllers import get_or_none, podstatus, resource_type
from kubesim.controllers import podstate as ps
from kubesim.controllers.podevents import PodEvents
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.controllers.volumes import VolumeManager
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

PodKey = tuple[str, str]
HOST_IP = "172.18.0.2"
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
DEFAULT_GRACE_SECONDS = 30.0
MOUNT_RETRY_SECONDS = 1.0
# A container runs at least this long (real time) before it exits, so restart loops cannot spin the
# CPU.
MIN_RUN_REAL_SECONDS = 0.005


@dataclass
class _Pod:
    uid: str
    runtime: ps.PodRuntime
    pod_ip: str | None = None
    stop_at: float | None = None
    deleted: bool = False


class PodIPs:
    """Unique pod IPs from 10.244.0.0/16, released when the pod is gone."""

    def __init__(self) -> None:
        self._hosts = POD_NETWORK.num_addresses - 2
        self._next = 1
        self._used: set[int] = set()

    def allocate(self) -> str:
        if len(self._used) >= self._hosts - 1:
            raise RuntimeError("pod network exhausted")
        while self._next in self._used or self._next == 1:
            self._next = self._next % self._hosts + 1
        offset = self._next
        self._used.add(offset)
        self._next = offset % self._hosts + 1
        return str(POD_NETWORK.network_address + offset)

    def release(self, ip: str | None) -> None:
        if ip is not None:
            self._used.discard(int(ipaddress.ip_address(ip)) - int(POD_NETWORK.network_address))


class Kubelet:
    """One node's kubelet stand-in."""

    name = "kubelet"

    def __init__(
        self, cluster: Cluster, settings: SimSettings, clock: Clock, volumes: VolumeManager
    ) -> None:
        self._cluster = cluster
        self._settings = settings
        self._clock = clock
        self._volumes = volumes
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._queue: WorkQueue[PodKey] = WorkQueue(clock)
        self._pods: dict[PodKey, _Pod] = {}
        self._own_write: tuple[PodKey, str] | None = None
        """The pod (and the resourceVersion it read) whose status this kubelet is writing now: the
        change that write commits needs no second sync."""
        self._ips = PodIPs()
        self.events = PodEvents(cluster, clock, settings.node_name)
        self._started = False
        self._node_ips: dict[str, str] = {}
        """The nodes this one kubelet loop serves (every Node of the cluster), by name: their
        InternalIP."""
        self._down: dict[str, float] = {}
        """Nodes whose kubelet is stopped (`node_down`), and since when: their pods are not
        synced."""
        self.power_listeners: list[Callable[[str, bool], None]] = []
        """Called with (node, up) when a node's kubelet stops or starts: the node lifecycle
        controller's heartbeat (kubesim writes no Lease)."""
        self._nodes_rt = resource_type(cluster, "v1", "Node")
        self.devices = devices.DeviceManager(s.name for s in settings.node_shapes() if s.unlimited)
        """Which container holds which GPU, on every node."""
        self._rejected: dict[PodKey, str] = {}
        """Pods refused at admission (too few free GPUs), by the UID refused: never run."""
        for node in cluster.list(self._nodes_rt, None)["items"]:
            self._node_changed("ADDED", node)
        self._started = True

    async def run(self) -> None:
        for pod in self._cluster.list(self._pods_rt, None)["items"]:
            self._queue.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        await process(self.name, self._queue, self._sync)

    def _node_changed(self, event: EventType, node: dict[str, Any]) -> None:
        """Tracks the nodes this kubelet serves; pods already bound to a node that appears start."""
        name = str(node["metadata"]["name"])
        if event == "DELETED":
            self._node_ips.pop(name, None)
            self._down.pop(name, None)
            self.devices.node_changed(name, None)
            return
        status, labels = node.get("status") or {}, node["metadata"].get("labels") or {}
        self.devices.node_changed(name, status.get("allocatable") or {}, labels)
        known = name in self._node_ips
        addresses = status.get("addresses") or ()
        ips = [a.get("address") for a in addresses if a.get("type") == "InternalIP"]
        self._node_ips[name] = str(ips[0]) if ips else HOST_IP
        if not known and self._started:
            selector = f"spec.nodeName={name}"
            for pod in self._cluster.list(self._pods_rt, None, field_selector=selector)["items"]:
                self._queue.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    # --- node-level faults tests can trigger ---------------------------------------------------
    def node_down(self, node: str) -> None:
        """The node's kubelet stops, as a powered-off machine: no more status of the node or of its
        pods (they keep what they last reported) and its containers are gone."""
        self._require_node(node)
        if node in self._down:
            return
        self._down[node] = self._clock.now()
        for key in self._pod_keys(node):
            self._node_lost(key)
        for listener in self.power_listeners:
            listener(node, False)

    def node_up(self, node: str) -> None:
        """The kubelet comes back: it posts Ready again and syncs the node's pods; a container that
        died with the node is reported as exited with 255 (reason Unknown) and restarted per
        restartPolicy, as after a reboot."""
        stored = self._require_node(node)
        died_at = self._down.pop(node, None)
        if died_at is None:
            return
        status = dict(stored.get("status") or {})
        status["conditions"] = nodes.posted_conditions(
            status.get("conditions") or (), self._clock.timestamp()
        )
        self._cluster.update(
            self._nodes_rt, None, node, {**stored, "status": status}, subresource="status"
        )
        for listener in self.power_listeners:
            listener(node, True)
        for key in self._pod_keys(node):
            self._node_restarted(key, died_at)
            self._queue.add(key)

    def is_down(self, node: str) -> bool:
        return node in self._down

    def _require_node(self, node: str) -> dict[str, Any]:
        stored = get_or_none(self._cluster, self._nodes_rt, None, node)
        if stored is None:
            raise errors.not_found("nodes", "", node)
        return stored

    def _pod_keys(self, node: str) -> list[PodKey]:
        selected = self._cluster.list(
            self._pods_rt, None, field_selector=f"spec.nodeName={node}", copy_objects=False
        )["items"]
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in selected]

    def _node_lost(self, key: PodKey) -> None:
        """The pod's node went down: its timers stop (the simulated containers freeze)."""
        self._queue.cancel(key)

    def _node_restarted(self, key: PodKey, died_at: float) -> None:
        entry = self._pods.get(key)
        pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False)
        if entry is None or pod is None:
            return
        # A pod being deleted is not started again: its containers are gone, it ends now.
        policy = "Never" if pod["metadata"].get("deletionTimestamp") else self._policy(pod)
        entry.runtime = ps.node_restarted(entry.runtime, died_at, self._clock.now(), policy)

    def evict(
        self, namespace: str, name: str, message: str = "The node was low on resource: memory."
    ) -> None:
        """Evicts the pod (node pressure): phase Failed, reason Evicted, containers killed. Not
        deleted."""
        entry = self._entry(namespace, name)
        running = entry.runtime.stage in ("Initializing", "Running")
        entry.runtime = ps.evicted(entry.runtime, message, self._clock.now())
        pod = get_or_none(self._cluster, self._pods_rt, namespace, name)
        if pod is not None and running:
            self.events.evicted(pod, message)
            for container, init in _running_containers(pod, entry.runtime):
                self.events.killing(pod, container, init=init)
        self._sync((namespace, name))

    def kill(self, namespace: str, name: str, exit_code: int = ps.SIGKILL_EXIT_CODE) -> None:
        """The pod's containers exit now with `exit_code`; restartPolicy decides what happens
        next."""
        entry = self._entry(namespace, name)
        policy = self._policy(self._cluster.get(self._pods_rt, namespace, name))
        entry.runtime = ps.container_exited(entry.runtime, exit_code, self._clock.now(), policy)
        self._sync((namespace, name))

    def host_ip(self, pod: Mapping[str, Any]) -> str:
        """The InternalIP of the pod's node."""
        return self._node_ips.get(str((pod.get("spec") or {}).get("nodeName") or ""), HOST_IP)

    def runtime(self, namespace: str, name: str) -> ps.PodRuntime | None:
        entry = self._pods.get((namespace, name))
        return entry.runtime if entry else None

    def routes(self) -> list[web.RouteDef]:
        """`evict`, `kill`, `node_down` and `node_up` over HTTP, for clients in another process
        (CLI sim, benchmarks)."""
        base = "/kubesim/v1/namespaces/{ns}/pods/{pod}"
        return [
            web.post(f"{base}/evict", self._handle_evict),
            web.post(f"{base}/kill", self._handle_kill),
            web.post("/kubesim/v1/nodes/{node}/down", self._handle_power),
            web.post("/kubesim/v1/nodes/{node}/up", self._handle_power),
            web.get("/kubesim/v1/nodes/{node}/podresources", self._handle_pod_resources),
        ]

    async def _handle_power(self, request: web.Request) -> web.Response:
        node = request.match_info["node"]
        try:
            if request.path.endswith("/down"):
                self.node_down(node)
            else:
                self.node_up(node)
        except errors.StatusError as err:
            return web.json_response(err.status(), status=err.code)
        return web.json_response(self._cluster.get(self._nodes_rt, None, node))

    # --- devices --------------------------------------------------------------------------------
    def pod_resources(self, node: str) -> dict[str, Any]:
        """The PodResources `List` of `node`: its pods that are not terminal, each container with
        its GPU ids and the GPUs the container runtime would give it (`kubesim.devices`)."""
        if node not in self._node_ips:
            raise errors.not_found("nodes", "", node)
        node_ids = self.devices.node(node).gpus()
        selector = f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        listed = []
        for pod in self._cluster.list(self._pods_rt, None, field_selector=selector)["items"]:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            key = (str(meta["namespace"]), str(meta["name"]))
            allocated = self.devices.allocation(key)
            containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
            visible = {
                str(c.get("name", "")): devices.visible_devices(
                    self.visible_devices_value(key, c, allocated.get(str(c.get("name", ""))) or ()),
                    node_ids,
                )
                for c in containers
            }
            listed.append(devices.pod_resources(*key, containers, allocated, visible))
        return {"podResources": listed}

    def visible_devices_value(
        self, key: PodKey, container: Mapping[str, Any], allocated: tuple[str, ...]
    ) -> str | None:
        """The container's NVIDIA_VISIBLE_DEVICES as its runtime would see it (None: unset)."""
        image = self._settings.images.get(str(container.get("image", "")))
        return devices.final_visible_value(container, dict(image.env), allocated)

    def _admit_devices(self, key: PodKey, pod: dict[str, Any]) -> bool:
        """The device manager's share of pod admission: False when the pod was rejected for want
        of GPUs (phase Failed, reason UnexpectedAdmissionError, as the kubelet's `rejectPod`)."""
        meta = pod["metadata"]
        if self._rejected.get(key) == meta.get("uid"):
            return False
        try:
            self.devices.admit(str(pod["spec"]["nodeName"]), key, pod["spec"])
            return True
        except devices.AllocationError as err:
            message = f"Allocate failed due to {err}, which is unexpected"
        self._rejected[key] = str(meta.get("uid", ""))
        self.events.rejected(pod, "UnexpectedAdmissionError", message)
        status = {
            **(pod.get("status") or {}),
            "phase": "Failed",
            "reason": "UnexpectedAdmissionError",
            "message": f"Pod was rejected: {message}",
        }
        body = {**pod, "metadata": dict(meta), "status": status}
        self._cluster.update(self._pods_rt, *key, body, subresource="status")
        return False

    def _rejected_pod(self, key: PodKey, pod: dict[str, Any]) -> bool:
        """A pod refused at admission: nothing runs; deleted at once when asked."""
        if self._rejected.get(key) != pod["metadata"].get("uid"):
            return False
        if pod["metadata"].get("deletionTimestamp"):
            with contextlib.suppress(errors.StatusError):
                self._cluster.delete(
                    self._pods_rt, *key, options=DeleteOptions(grace_period_seconds=0)
                )
        return True

    async def _handle_pod_resources(self, request: web.Request) -> web.Response:
        try:
            return web.json_response(self.pod_resources(request.match_info["node"]))
        except errors.StatusError as err:
            return web.json_response(err.status(), status=err.code)

    async def _handle_evict(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        message = str(body.get("message") or "The node was low on resource: memory.")
        return self._answer(lambda ns, pod: self.evict(ns, pod, message), request)

    async def _handle_kill(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        try:
            code = int(body.get("exitCode", ps.SIGKILL_EXIT_CODE))
        except (TypeError, ValueError):
            return web.json_response(
                errors.bad_request("exitCode must be an integer").status(), status=400
            )
        if not ps.is_exit_code(code):
            return web.json_response(
                errors.bad_request("exitCode must be an int32").status(), status=400
            )
        return self._answer(lambda ns, pod: self.kill(ns, pod, code), request)

    def _answer(self, act: Callable[[str, str], None], request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["pod"]
        try:
            act(ns, name)
        except errors.StatusError as err:
            return web.json_response(err.status(), status=err.code)
        return web.json_response(self._cluster.get(self._pods_rt, ns, name))

    # --- internals -------------------------------------------------------------------------------
    def _entry(self, namespace: str, name: str) -> _Pod:
        self._check_node_up(namespace, name)
        self._sync((namespace, name))
        entry = self._pods.get((namespace, name))
        if entry is None:
            raise errors.not_found("pods", "", name)
        return entry

    def _check_node_up(self, namespace: str, name: str) -> None:
        """A fault needs a running kubelet: a pod on a down node answers 409."""
        pod = get_or_none(self._cluster, self._pods_rt, namespace, name, copy=False)
        node = str(((pod or {}).get("spec") or {}).get("nodeName") or "")
        if node in self._down:
            raise errors.conflict("pods", "", name, f"the kubelet of node {node} is down")

    @staticmethod
    def _policy(pod: dict[str, Any]) -> ps.RestartPolicy:
        policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
        return cast(
            ps.RestartPolicy, policy if policy in ("Always", "OnFailure", "Never") else "Always"
        )

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if (
            rt.plural != "pods" or rt != self._pods_rt
        ):  # the plural first: no dataclass __eq__ per Event
            if rt.plural == "nodes" and not rt.group:
                self._node_changed(event, obj)
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if event == "DELETED":
            self._forget(key, str(meta.get("uid", "")))
        elif event == "ADDED" or (event == "MODIFIED" and not self._is_own_write(key, old)):
            self._queue.add(key)

    def _is_own_write(self, key: PodKey, old: dict[str, Any] | None) -> bool:
        own = self._own_write
        return (
            own is not None
            and own[0] == key
            and old is not None
            and (old.get("metadata") or {}).get("resourceVersion") == own[1]
        )

    def _forget(self, key: PodKey, uid: str) -> None:
        if self._rejected.get(key) == uid:
            del self._rejected[key]
        entry = self._pods.get(key)
        if entry is not None and entry.uid == uid:
            self.devices.release(key)
            del self._pods[key]
            self._ips.release(entry.pod_ip)
            self._queue.cancel(key)
            self._volumes.forget(*key)

    def _assigned_pod(self, key: PodKey, known_uid: str | None) -> dict[str, Any] | None:
        """The pod to sync: None when it is gone (what this kubelet knew of it, `known_uid`, is
        forgotten) or bound to another node."""
        pod = get_or_none(self._cluster, self._pods_rt, *key, copy=False)
        if pod is None:
            if known_uid is not None:
                self._forget(key, known_uid)
            return None
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in self._node_ips:
            return None  # not scheduled yet, or bound to a node that does not exist: stays Pending
        if self._down and node in self._down:
            return None  # its kubelet is stopped
        return pod

    def _sync(self, key: PodKey) -> None:
        known = self._pods.get(key)
        pod = self._assigned_pod(key, known.uid if known else None)
        if pod is None:
            return
        meta = pod["metadata"]
        if self._rejected and self._rejected_pod(key, pod):
            return
        now = self._clock.now()
        entry = self._pods.get(key)
        if entry is None or entry.uid != meta.get("uid"):
            if entry is not None:
                self._forget(key, entry.uid)
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self.events.scheduled(pod)
                if not self._admit_devices(key, pod):
                    return
            entry = _Pod(uid=str(meta.get("uid", "")), runtime=ps.PodRuntime(created_at=now))
            self._pods[key] = entry
        timing = ps.PodTiming.from_annotations(
            meta.get("annotations") or {},
            start_default=self._settings.start_seconds,
            ready_default=self._settings.ready_seconds,
            min_run=MIN_RUN_REAL_SECONDS / self._clock.scale,
            init_containers=(pod.get("spec") or {}).get("initContainers") or (),
        )
        before = entry.runtime
        can_start = before.stage != "Pending" or self._volumes.can_mount(pod)
        entry.runtime = ps.advance(before, timing, self._policy(pod), now, can_start=can_start)
        advanced, was_stopping = entry.runtime, entry.stop_at is not None
        stopping = self._stop_if_deleted(entry, meta, timing, now)
        self._record(pod, before, advanced, killing=stopping and not was_stopping)
        if before.stage == "Pending" and entry.runtime.started_at is not None:
            entry.pod_ip = self._ips.allocate()
            self._volumes.pod_started(pod)
        if entry.runtime.stage == "Terminated":
            self._volumes.pod_stopped(*key)
            self.devices.release(key)

        status = podstatus.render_status(
            pod,
            entry.runtime,
            timing,
            now,
            podstatus.Placement(self.host_ip(pod), entry.pod_ip),
            self._clock.timestamp,
        )
        if status != pod.get("status"):
            self._own_write = (key, str(meta.get("resourceVersion", "")))
            # Handed over: the status was rendered for this write, and the top level and the
            # metadata (the parts a write changes in place) are copies, so the cluster copies
            # nothing. `decoded`: podstatus renders only what the decode keeps (no nulls; strings,
            # int32s, booleans).
            body = {**pod, "metadata": dict(meta), "status": status}
            try:
                self._cluster.update(
                    self._pods_rt, key[0], key[1], body, subresource="status", decoded=True
                )
            finally:
                self._own_write = None

        if stopping and entry.runtime.stage == "Terminated":
            if not entry.deleted:
                entry.deleted = True
                self._cluster.delete(
                    self._pods_rt, key[0], key[1], options=DeleteOptions(grace_period_seconds=0)
                )
            return
        self._schedule(key, entry, timing, now)

    def _record(
        self, pod: dict[str, Any], before: ps.PodRuntime, after: ps.PodRuntime, *, killing: bool
    ) -> None:
        """The kubelet's Events for what changed in this sync (cheap: a few comparisons when nothing
        did)."""
        if after.volumes_blocked and after.stage == "Pending":
            problem = self._volumes.mount_problem(pod)
            if problem is not None:
                self.events.failed_mount(pod, problem)
        spec = pod.get("spec") or {}
        inits = [str(c.get("name", "")) for c in spec.get("initContainers") or []]
        apps = [str(c.get("name", "")) for c in spec.get("containers") or []]
        # Init containers started since the last sync (restarts of the running one included).
        for index in range(len(before.init_runs), len(after.init_runs)):
            if index < len(inits):
                self.events.started(pod, inits[index], init=True)
        if after.init_restart_count > before.init_restart_count and after.init_runs:
            index = len(after.init_runs) - 1
            if index < len(inits):
                self.events.back_off(pod, inits[index], init=True)
                self.events.started(pod, inits[index], init=True)
        if after.container_started_at is not None and before.container_started_at is None:
            for name in apps:
                self.events.started(pod, name)
        elif after.restart_count > before.restart_count:
            # However many exits one sync covered, the event is recorded once (a repeat only
            # counts).
            crashed = after.last_termination is not None and after.last_termination.exit_code != 0
            for name in apps:
                if crashed:
                    self.events.back_off(pod, name)
                self.events.started(pod, name)
        if killing:
            for name, init in _running_containers(pod, after):
                self.events.killing(pod, name, init=init)

    @staticmethod
    def _stop_if_deleted(
        entry: _Pod, meta: dict[str, Any], timing: ps.PodTiming, now: float
    ) -> bool:
        """SIGTERM on deletion: containers stop after min(grace, termination-seconds)."""
        if meta.get("deletionTimestamp") is None:
            return False
        if entry.stop_at is None:
            grace = float(meta.get("deletionGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
            running = entry.runtime.stage in ("Initializing", "Running")
            entry.stop_at = now + min(grace, timing.termination) if running else now
        if now >= entry.stop_at:
            entry.runtime = ps.stopped(entry.runtime, timing.termination_exit_code, now)
        return True

    def _schedule(self, key: PodKey, entry: _Pod, timing: ps.PodTiming, now: float) -> None:
        deadlines = [
            d
            for d in (ps.next_deadline(entry.runtime, timing, now), entry.stop_at)
            if d is not None
        ]
        if entry.runtime.volumes_blocked and entry.runtime.stage == "Pending":
            # ContainerCreating: a ConfigMap or Secret a volume needs is missing; the kubelet
            # retries.
            deadlines.append(now + MOUNT_RETRY_SECONDS)
        if deadlines:
            self._queue.add_after(key, min(deadlines) - now)


def _running_containers(pod: dict[str, Any], rt: ps.PodRuntime) -> list[tuple[str, bool]]:
    """(name, is_init) of the containers running in `rt`: the app containers and sidecars once
    Running, the init containers started and not finished while Initializing."""
    spec = pod.get("spec") or {}
    inits = [str(c.get("name", "")) for c in spec.get("initContainers") or []]
    running = [
        (inits[i], True)
        for i, r in enumerate(rt.init_runs)
        if r.finished_at is None and i < len(inits)
    ]
    if rt.stage == "Running":
        running += [(str(c.get("name", "")), False) for c in spec.get("containers") or []]
    elif rt.stage != "Initializing":
        return []
    return running


async def _json_body(request: web.Request) -> dict[str, Any]:
    text = await request.text()
    try:
        body = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        body = {}
    return body if isinstance(body, dict) else {}
