"""ConfigMap (and Secret) volumes as a kubelet serves them, plus the file view of a pod's mounts.

A pod sees a snapshot of its volumes taken when it starts. The snapshot is refreshed at the kubelet's
periodic pod sync (`volume_sync_seconds`, jittered per pod by up to 50% like the kubelet's pod workers)
or, at once, when the pod object itself changes (any metadata or spec change: the kubelet resyncs a pod
on every update it receives). A status-only write does not count, as in the kubelet's pod config source.
`subPath` mounts are copied at start and never refreshed, which is also what a real kubelet does.

`GET /kubesim/v1/namespaces/{ns}/pods/{pod}/files/{path}` returns a file as the pod sees it now, with
`X-Kubesim-File-Mode` (octal), `X-Kubesim-Synced-At` and `Last-Modified` (when the content last changed).
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim.controllers import Clock, WorkQueue, get_or_none, process, resource_type

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

DEFAULT_MODE = 0o644
# The kubelet's pod workers requeue a pod after wait.Jitter(syncFrequency, 0.5).
SYNC_JITTER = 0.5

PodKey = tuple[str, str]
Lookup = Callable[[str, str], dict[str, Any] | None]


class MissingSource(Exception):
    """A non-optional ConfigMap or Secret (or one of its keys) does not exist: the volume cannot mount."""


@dataclass(frozen=True)
class FileContent:
    data: bytes
    mode: int


@dataclass(frozen=True)
class MountedFile:
    """A file as the pod sees it now."""

    data: bytes
    mode: int
    synced_at: float
    changed_at: float


def _decode(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.encode()


def _source_files(
    obj: Mapping[str, Any] | None,
    *,
    secret: bool,
    items: list[dict[str, Any]] | None,
    optional: bool,
    default_mode: int,
    what: str,
) -> dict[str, FileContent]:
    if obj is None:
        if optional:
            return {}
        raise MissingSource(what)
    data: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        data[key] = _decode(value) if secret else str(value).encode()
    for key, value in (obj.get("binaryData") or {}).items():
        data[key] = _decode(value)
    for key, value in (obj.get("stringData") or {}).items():
        data.setdefault(key, str(value).encode())
    if not items:
        return {key: FileContent(value, default_mode) for key, value in data.items()}
    out: dict[str, FileContent] = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in data:
            if optional:
                continue
            raise MissingSource(f"{what}: key {key!r}")
        out[str(item.get("path", key))] = FileContent(data[key], int(item.get("mode", default_mode)))
    return out


def _source(
    src: Mapping[str, Any], kind: str, name_field: str, default_mode: int, lookup: Lookup
) -> dict[str, FileContent]:
    """The files one ConfigMap or Secret source contributes (a volume or a projected source)."""
    name = str(src.get(name_field, ""))
    return _source_files(
        lookup(kind, name),
        secret=kind == "Secret",
        items=src.get("items"),
        optional=bool(src.get("optional")),
        default_mode=default_mode,
        what=f'{kind.lower()} "{name}"',
    )


# (field in a volume or projected source, kind, the field naming it in a volume); a projected Secret
# source names it with `name`, a Secret volume with `secretName`.
_SOURCES = (("configMap", "ConfigMap", "name"), ("secret", "Secret", "secretName"))


def project_volume(volume: Mapping[str, Any], lookup: Lookup) -> dict[str, FileContent] | None:
    """The files of one pod volume (path inside the volume -> content), None for kinds not modelled.

    `lookup(kind, name)` returns the ConfigMap or Secret in the pod's namespace, or None.
    Raises MissingSource when a non-optional source is absent.
    """
    for key, kind, name_field in _SOURCES:
        if key in volume:
            src = volume[key] or {}
            return _source(src, kind, name_field, int(src.get("defaultMode", DEFAULT_MODE)), lookup)
    if "projected" in volume:
        projected = volume["projected"] or {}
        default_mode = int(projected.get("defaultMode", DEFAULT_MODE))
        files: dict[str, FileContent] = {}
        for source in projected.get("sources") or []:
            for key, kind, _ in _SOURCES:
                if key in source:
                    files.update(_source(source[key] or {}, kind, "name", default_mode, lookup))
        return files
    return None


def content_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """True when a pod update is one the kubelet resyncs on: anything but status and bookkeeping."""
    if old is None:
        return False

    def strip(obj: Mapping[str, Any]) -> tuple[Any, Any]:
        meta = {
            k: v
            for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "generation")
        }
        return meta, obj.get("spec")

    return strip(old) != strip(new)


@dataclass
class PodVolumes:
    """The mounted view of one running pod."""

    uid: str
    pod: dict[str, Any]
    files: dict[str, dict[str, FileContent]] = field(default_factory=dict)
    changed_at: dict[tuple[str, str], float] = field(default_factory=dict)
    sub_path_files: dict[str, FileContent] = field(default_factory=dict)
    synced_at: float = 0.0
    running: bool = True


class VolumeManager:
    """The kubelet's volume manager for configMap / secret / projected volumes, and the file endpoint."""

    name = "volumes"

    def __init__(
        self, cluster: Cluster, settings: SimSettings, clock: Clock, *, rng: random.Random | None = None
    ) -> None:
        self._cluster = cluster
        self._settings = settings
        self._clock = clock
        self._rng = rng or random.Random()
        self._pods_rt = resource_type(cluster, "v1", "Pod")
        self._configmaps_rt = resource_type(cluster, "v1", "ConfigMap")
        self._secrets_rt = resource_type(cluster, "v1", "Secret")
        self._views: dict[PodKey, PodVolumes] = {}
        self._queue: WorkQueue[PodKey] = WorkQueue(clock)

    # --- what the kubelet calls ------------------------------------------------------------------
    def can_mount(self, pod: Mapping[str, Any]) -> bool:
        """False while a non-optional ConfigMap or Secret a volume needs is missing (ContainerCreating)."""
        lookup = self._lookup(str(pod["metadata"].get("namespace", "")))
        try:
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                project_volume(volume, lookup)
        except MissingSource:
            return False
        return True

    def pod_started(self, pod: Mapping[str, Any]) -> None:
        """Takes the pod's first snapshot (its containers start now) and schedules periodic syncs."""
        meta = pod["metadata"]
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        modelled = ("configMap", "secret", "projected")
        if not any(k in v for v in (pod.get("spec") or {}).get("volumes") or [] for k in modelled):
            self.forget(*key)
            return
        view = PodVolumes(uid=str(meta.get("uid", "")), pod=dict(pod))
        self._views[key] = view
        self._sync_view(key, view)
        self._sub_path_snapshot(view)

    def pod_stopped(self, namespace: str, name: str) -> None:
        view = self._views.get((namespace, name))
        if view is not None:
            view.running = False
            self._queue.cancel((namespace, name))

    def forget(self, namespace: str, name: str) -> None:
        self._views.pop((namespace, name), None)
        self._queue.cancel((namespace, name))

    # --- what tests and the HTTP route call ------------------------------------------------------
    def read_file(self, namespace: str, pod: str, path: str) -> MountedFile | None:
        """The file at container path `path` as pod `namespace/pod` sees it now; None if not there."""
        view = self._views.get((namespace, pod))
        if view is None or not view.running:
            return None
        path = posixpath.normpath("/" + path.lstrip("/"))
        spec = view.pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            for mount in container.get("volumeMounts") or []:
                found = self._resolve(view, mount, path)
                if found is not None:
                    return found
        return None

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/kubesim/v1/namespaces/{ns}/pods/{pod}/files/{path:.*}", self._handle_file)]

    async def run(self) -> None:
        await process(self.name, self._queue, self._sync)

    # --- internals -------------------------------------------------------------------------------
    def _resolve(self, view: PodVolumes, mount: Mapping[str, Any], path: str) -> MountedFile | None:
        mount_path = posixpath.normpath("/" + str(mount.get("mountPath", "")).lstrip("/"))
        volume = str(mount.get("name", ""))
        if volume not in view.files:
            return None
        if mount.get("subPath"):
            if path != mount_path:
                return None
            content = view.sub_path_files.get(mount_path)
            changed = view.changed_at.get(("", mount_path), view.synced_at)
        else:
            if not path.startswith(mount_path.rstrip("/") + "/"):
                return None
            rel = path[len(mount_path.rstrip("/")) + 1 :]
            content = view.files[volume].get(rel)
            changed = view.changed_at.get((volume, rel), view.synced_at)
        if content is None:
            return None
        return MountedFile(data=content.data, mode=content.mode, synced_at=view.synced_at, changed_at=changed)

    def _lookup(self, namespace: str) -> Lookup:
        def lookup(kind: str, name: str) -> dict[str, Any] | None:
            rt = self._configmaps_rt if kind == "ConfigMap" else self._secrets_rt
            return get_or_none(self._cluster, rt, namespace, name)

        return lookup

    def _sync_view(self, key: PodKey, view: PodVolumes) -> None:
        now = self._clock.now()
        lookup = self._lookup(key[0])
        for volume in (view.pod.get("spec") or {}).get("volumes") or []:
            name = str(volume.get("name", ""))
            try:
                files = project_volume(volume, lookup)
            except MissingSource:
                # The kubelet keeps serving the last content it wrote when a source disappears.
                continue
            if files is None:
                continue
            old = view.files.get(name, {})
            for rel, content in files.items():
                if old.get(rel) != content:
                    view.changed_at[(name, rel)] = now
            view.files[name] = files
        view.synced_at = now
        jitter = 1.0 + self._rng.random() * SYNC_JITTER
        self._queue.add_after(key, self._settings.volume_sync_seconds * jitter, replace=True)

    def _sub_path_snapshot(self, view: PodVolumes) -> None:
        spec = view.pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            for mount in container.get("volumeMounts") or []:
                sub_path = mount.get("subPath")
                files = view.files.get(str(mount.get("name", "")))
                if sub_path and files is not None and sub_path in files:
                    mount_path = posixpath.normpath("/" + str(mount.get("mountPath", "")).lstrip("/"))
                    view.sub_path_files[mount_path] = files[sub_path]
                    view.changed_at[("", mount_path)] = view.synced_at

    def _sync(self, key: PodKey) -> None:
        view = self._views.get(key)
        if view is None or not view.running:
            return
        pod = get_or_none(self._cluster, self._pods_rt, key[0], key[1])
        if pod is None or str(pod["metadata"].get("uid", "")) != view.uid:
            self.forget(*key)
            return
        view.pod = pod
        self._sync_view(key, view)

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if rt != self._pods_rt:
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        if key not in self._views:
            return
        if event == "DELETED":
            self.forget(*key)
        elif event == "MODIFIED" and content_changed(old, obj):
            self._queue.add(key)

    async def _handle_file(self, request: web.Request) -> web.Response:
        ns, pod, path = request.match_info["ns"], request.match_info["pod"], request.match_info["path"]
        found = self.read_file(ns, pod, path)
        if found is None:
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f'file "/{path}" not found in running pod "{ns}/{pod}"',
                "reason": "NotFound",
                "details": {"name": pod, "kind": "pods"},
                "code": 404,
            }
            return web.json_response(body, status=404)
        headers = {
            "X-Kubesim-File-Mode": f"{found.mode:04o}",
            "X-Kubesim-Synced-At": self._clock.micro_timestamp(found.synced_at),
            "Last-Modified": format_datetime(self._clock.wall(found.changed_at), usegmt=True),
        }
        try:
            text = found.data.decode()
        except UnicodeDecodeError:
            return web.Response(body=found.data, content_type="application/octet-stream", headers=headers)
        return web.Response(text=text, content_type="text/plain", headers=headers)
