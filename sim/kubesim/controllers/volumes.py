"""ConfigMap, Secret, downward API and projected volumes as a kubelet serves them, and the pod's
files.

A pod sees a snapshot of its volumes taken when it starts, refreshed at the kubelet's periodic pod
sync (`volume_sync_seconds`, jittered per pod) or at once when the pod's metadata or spec changes;
`subPath` mounts never refresh. Downward API items are resolved by `kubesim.downward` (what a volume
cannot serve fails the mount with `InvalidSource`); a projected `serviceAccountToken` is an unsigned
JWT-shaped string. `add_sync_listener` lets a runtime keeping volumes on disk follow every snapshot.
`GET /kubesim/v1/namespaces/{ns}/pods/{pod}/files/{path}` returns a file as the pod sees it now,
with `X-Kubesim-File-Mode`, `X-Kubesim-Synced-At` and `Last-Modified`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import posixpath
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import downward
from kubesim.clock import Clock
from kubesim.controllers import get_or_none, resource_type
from kubesim.filecontent import FileContent
from kubesim.workqueue import WorkQueue, process

if TYPE_CHECKING:
    from kubesim.cluster import Cluster, EventType
    from kubesim.registry import ResourceType
    from kubesim.settings import SimSettings

log = logging.getLogger(__name__)

DEFAULT_MODE = 0o644
# The kubelet's pod workers requeue a pod after wait.Jitter(syncFrequency, 0.5).
SYNC_JITTER = 0.5
# The kubelet's volume sources that are files it writes (AtomicWriter), refreshed on every pod sync.
MODELLED_KINDS = ("configMap", "secret", "downwardAPI", "projected")
TOKEN_EXPIRATION_SECONDS = 3600
TOKEN_ISSUER = "https://kubernetes.default.svc.cluster.local"

PodKey = tuple[str, str]
Lookup = Callable[[str, str], dict[str, Any] | None]


class VolumeSourceError(Exception):
    """A volume cannot be set up now: the kubelet keeps the pod in ContainerCreating and retries."""


class MissingSource(VolumeSourceError):
    """A non-optional ConfigMap or Secret (or one of its keys) does not exist: the volume cannot
    mount."""


class InvalidSource(VolumeSourceError):
    """A downward API item the kubelet cannot resolve (unsupported fieldPath, unknown container,
    ...)."""


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
        out[str(item.get("path", key))] = FileContent(
            data[key], int(item.get("mode", default_mode))
        )
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


def _downward_api_files(
    items: list[dict[str, Any]],
    pod: Mapping[str, Any],
    default_mode: int,
    node_allocatable: Mapping[str, str],
) -> dict[str, FileContent]:
    """downwardapi.CollectData."""
    out: dict[str, FileContent] = {}
    for item in items:
        mode = int(item.get("mode", default_mode))
        try:
            if item.get("fieldRef"):
                text = downward.object_field_value(pod, str(item["fieldRef"].get("fieldPath", "")))
            elif item.get("resourceFieldRef"):
                text = downward.volume_resource_value(
                    pod, item["resourceFieldRef"], node_allocatable
                )
            else:
                text = ""
        except downward.DownwardAPIError as err:
            raise InvalidSource(str(err)) from err
        out[posixpath.normpath(str(item.get("path", "")))] = FileContent(text.encode(), mode)
    return out


def _effective_run_as_user(pod: Mapping[str, Any], container: Mapping[str, Any]) -> int | None:
    pod_context = (pod.get("spec") or {}).get("securityContext") or {}
    for context in (container.get("securityContext") or {}, pod_context):
        if context.get("runAsUser") is not None:
            return int(context["runAsUser"])
    return None


def pod_fs_user(pod: Mapping[str, Any]) -> int | None:
    """util.FsUserFrom: the uid every init and app container runs as, None unless they all set the
    same."""
    spec = pod.get("spec") or {}
    found: int | None = None
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        uid = _effective_run_as_user(pod, container)
        if uid is None or (found is not None and uid != found):
            return None
        found = uid
    return found


def pod_fs_group(pod: Mapping[str, Any]) -> int | None:
    group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
    return None if group is None else int(group)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _issued_at(pod: Mapping[str, Any]) -> int:
    created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def service_account_token(pod: Mapping[str, Any], source: Mapping[str, Any]) -> bytes:
    """A JWT-shaped stand-in for the bound token a kubelet requests. It is not signed by any key
    (kubesim checks no tokens) and, being derived from the pod and the source only, never changes,
    so the file is not rewritten on every sync; a real kubelet rotates it at 80% of its lifetime."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    namespace, account = (
        str(meta.get("namespace", "")),
        str(spec.get("serviceAccountName") or "default"),
    )
    issued = _issued_at(pod)
    claims = {
        "aud": [str(source.get("audience") or TOKEN_ISSUER)],
        "exp": issued + int(source.get("expirationSeconds") or TOKEN_EXPIRATION_SECONDS),
        "iat": issued,
        "iss": TOKEN_ISSUER,
        "kubernetes.io": {
            "namespace": namespace,
            "pod": {"name": str(meta.get("name", "")), "uid": str(meta.get("uid", ""))},
            "serviceaccount": {"name": account},
        },
        "nbf": issued,
        "sub": f"system:serviceaccount:{namespace}:{account}",
    }
    header = _b64url(
        json.dumps({"alg": "none", "kid": "kubesim", "typ": "JWT"}, sort_keys=True).encode()
    )
    body = _b64url(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
    # A digest, not a signature: it only makes the token look like the three-part strings clients
    # expect.
    tag = _b64url(hashlib.sha256(f"kubesim.{header}.{body}".encode()).digest())
    return f"{header}.{body}.{tag}".encode()


def _token_file(
    pod: Mapping[str, Any], source: Mapping[str, Any], default_mode: int
) -> FileContent:
    fs_user = pod_fs_user(pod)
    # projected.go: with an fsUser or fsGroup the token is 0600 (SetVolumeOwnership makes it 0640).
    mode = 0o600 if fs_user is not None or pod_fs_group(pod) is not None else default_mode
    return FileContent(service_account_token(pod, source), mode, fs_user)


def project_volume(
    volume: Mapping[str, Any],
    lookup: Lookup,
    pod: Mapping[str, Any] | None = None,
    *,
    node_allocatable: Mapping[str, str] = downward.NODE_ALLOCATABLE,
) -> dict[str, FileContent] | None:
    """The files of one pod volume (path inside the volume -> content), None for kinds not modelled.

    `lookup(kind, name)` returns the ConfigMap or Secret in the pod's namespace, or None; `pod` is
    what downward API items and service account tokens are taken from. Raises MissingSource when a
    non-optional source is absent, InvalidSource when a downward API item cannot be resolved.
    """
    pod = pod or {}
    for key, kind, name_field in _SOURCES:
        if key in volume:
            src = volume[key] or {}
            return _source(src, kind, name_field, int(src.get("defaultMode", DEFAULT_MODE)), lookup)
    if "downwardAPI" in volume:
        src = volume["downwardAPI"] or {}
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        return _downward_api_files(src.get("items") or [], pod, mode, node_allocatable)
    if "projected" in volume:
        projected = volume["projected"] or {}
        default_mode = int(projected.get("defaultMode", DEFAULT_MODE))
        files: dict[str, FileContent] = {}
        for source in projected.get("sources") or []:
            for key, kind, _ in _SOURCES:
                if key in source:
                    files.update(_source(source[key] or {}, kind, "name", default_mode, lookup))
            if source.get("downwardAPI") is not None:
                items = source["downwardAPI"].get("items") or []
                files.update(_downward_api_files(items, pod, default_mode, node_allocatable))
            token = source.get("serviceAccountToken")
            if token is not None:
                files[posixpath.normpath(str(token.get("path", "")))] = _token_file(
                    pod, token, default_mode
                )
            # clusterTrustBundle (and podCertificate) sources are not modelled: they contribute no
            # file.
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


class VolumeFiles(Mapping[str, Mapping[str, FileContent]]):
    """One sync's files of a pod: volume name -> path inside the volume -> content (modelled kinds
    only).

    `changed` names the volumes whose files differ from the previous sync (every volume on the
    first), `first` is True for the snapshot taken at `pod_started`.
    """

    def __init__(
        self,
        files: Mapping[str, Mapping[str, FileContent]],
        *,
        changed: frozenset[str],
        first: bool,
    ) -> None:
        self._files = {name: dict(content) for name, content in files.items()}
        self.changed = changed
        self.first = first

    def __getitem__(self, name: str) -> Mapping[str, FileContent]:
        return self._files[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __repr__(self) -> str:
        return (
            f"VolumeFiles({sorted(self._files)}, changed={sorted(self.changed)}, "
            f"first={self.first})"
        )


SyncListener = Callable[[PodKey, Mapping[str, Any], VolumeFiles], None]
"""Called as `listener(key, pod, files)` after each snapshot of a running pod's volumes."""


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
    """The kubelet's volume manager for configMap / secret / downwardAPI / projected volumes, and
    the file endpoint."""

    name = "volumes"

    def __init__(
        self,
        cluster: Cluster,
        settings: SimSettings,
        clock: Clock,
        *,
        rng: random.Random | None = None,
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
        self._listeners: list[SyncListener] = []

    def add_sync_listener(self, listener: SyncListener) -> None:
        """`listener(key, pod, files)` runs after the first snapshot of every started pod
        (`files.first`, possibly empty) and after every refresh of a running one (changed or not:
        `files.changed` says), never after `pod_stopped` or `forget`. It runs synchronously inside
        the sync; an exception it raises is logged and does not stop the other listeners or the
        periodic syncs."""
        self._listeners.append(listener)

    # --- what the kubelet calls ------------------------------------------------------------------
    def can_mount(self, pod: Mapping[str, Any]) -> bool:
        """False while a non-optional ConfigMap or Secret a volume needs is missing, or a downward
        API item cannot be resolved (ContainerCreating)."""
        return self.mount_problem(pod) is None

    def mount_problem(self, pod: Mapping[str, Any]) -> str | None:
        """Why a volume of the pod cannot be set up, worded as the kubelet's FailedMount event; None
        when every volume can."""
        lookup = self.lookup(str(pod["metadata"].get("namespace", "")))
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            try:
                project_volume(volume, lookup, pod)
            except MissingSource as err:
                return (
                    f'MountVolume.SetUp failed for volume "{volume.get("name", "")}" : {err} '
                    "not found"
                )
            except VolumeSourceError as err:
                return f'MountVolume.SetUp failed for volume "{volume.get("name", "")}" : {err}'
        return None

    def pod_started(self, pod: Mapping[str, Any]) -> None:
        """Takes the pod's first snapshot (its containers start now) and schedules periodic
        syncs."""
        meta = pod["metadata"]
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        volumes = (pod.get("spec") or {}).get("volumes") or []
        if not any(k in v for v in volumes for k in MODELLED_KINDS):
            self.forget(*key)
            # Nothing to refresh, but a runtime keeping volumes on disk still learns that the pod
            # started.
            self._notify(key, pod, VolumeFiles({}, changed=frozenset(), first=True))
            return
        view = PodVolumes(uid=str(meta.get("uid", "")), pod=dict(pod))
        self._views[key] = view
        changed = self._sync_view(key, view)
        self._sub_path_snapshot(view)
        self._notify(key, view.pod, VolumeFiles(view.files, changed=changed, first=True))

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
        """The file at container path `path` as pod `namespace/pod` sees it now; None if not
        there."""
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
        return [
            web.get("/kubesim/v1/namespaces/{ns}/pods/{pod}/files/{path:.*}", self._handle_file)
        ]

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
        return MountedFile(
            data=content.data, mode=content.mode, synced_at=view.synced_at, changed_at=changed
        )

    def lookup(self, namespace: str) -> Lookup:
        """ConfigMaps and Secrets of `namespace` by (kind, name), as the kubelet reads them."""

        def lookup(kind: str, name: str) -> dict[str, Any] | None:
            rt = self._configmaps_rt if kind == "ConfigMap" else self._secrets_rt
            return get_or_none(self._cluster, rt, namespace, name, copy=False)

        return lookup

    def _sync_view(self, key: PodKey, view: PodVolumes) -> frozenset[str]:
        """Re-projects every modelled volume; returns the names of those whose files changed."""
        now = self._clock.now()
        lookup = self.lookup(key[0])
        changed: set[str] = set()
        for volume in (view.pod.get("spec") or {}).get("volumes") or []:
            name = str(volume.get("name", ""))
            try:
                files = project_volume(volume, lookup, view.pod)
            except VolumeSourceError:
                # The kubelet keeps serving the last content it wrote when a source disappears.
                continue
            if files is None:
                continue
            old = view.files.get(name)
            if old != files:
                changed.add(name)
            for rel, content in files.items():
                if (old or {}).get(rel) != content:
                    view.changed_at[(name, rel)] = now
            view.files[name] = files
        view.synced_at = now
        jitter = 1.0 + self._rng.random() * SYNC_JITTER
        self._queue.add_after(key, self._settings.volume_sync_seconds * jitter, replace=True)
        return frozenset(changed)

    def _notify(self, key: PodKey, pod: Mapping[str, Any], files: VolumeFiles) -> None:
        for listener in list(self._listeners):
            try:
                listener(key, pod, files)
            except Exception:
                log.exception("kubesim volumes: sync listener %r failed for %s/%s", listener, *key)

    def _sub_path_snapshot(self, view: PodVolumes) -> None:
        spec = view.pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            for mount in container.get("volumeMounts") or []:
                sub_path = mount.get("subPath")
                files = view.files.get(str(mount.get("name", "")))
                if sub_path and files is not None and sub_path in files:
                    mount_path = posixpath.normpath(
                        "/" + str(mount.get("mountPath", "")).lstrip("/")
                    )
                    view.sub_path_files[mount_path] = files[sub_path]
                    view.changed_at[("", mount_path)] = view.synced_at

    def _sync(self, key: PodKey) -> None:
        view = self._views.get(key)
        if view is None or not view.running:
            return
        pod = get_or_none(self._cluster, self._pods_rt, key[0], key[1], copy=False)
        if pod is None or str(pod["metadata"].get("uid", "")) != view.uid:
            self.forget(*key)
            return
        view.pod = pod
        changed = self._sync_view(key, view)
        self._notify(key, pod, VolumeFiles(view.files, changed=changed, first=False))

    def on_change(
        self, event: EventType, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if (
            rt.plural != "pods" or rt != self._pods_rt
        ):  # the plural first: no dataclass __eq__ per Event
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
        ns, pod, path = (
            request.match_info["ns"],
            request.match_info["pod"],
            request.match_info["path"],
        )
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
            return web.Response(
                body=found.data, content_type="application/octet-stream", headers=headers
            )
        return web.Response(text=text, content_type="text/plain", headers=headers)
