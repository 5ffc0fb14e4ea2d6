"""The process runtime's volumes on disk: the kubelet's AtomicWriter layout, modes and owners, the
downward API contents, subPaths and the mount plan, on real files under tmp_path."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubesim.controllers.volumes import InvalidSource, project_volume
from kubesim.filecontent import FileContent
from kubesim.procrt import volumefiles
from kubesim.procrt.atomicwriter import AtomicWriter, PayloadError
from kubesim.procrt.envvars import kubelet_env
from kubesim.procrt.volumefiles import Mount, SubPathError, VolumeError

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="owners can only be changed as root")
TS_DIR = re.compile(r"^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$")
FS_GROUP = 4321


def payload(**files: str) -> dict[str, FileContent]:
    return {
        name.replace("__", "/"): FileContent(text.encode(), 0o644) for name, text in files.items()
    }


def mode(path: Path) -> int:
    """The mode a container sees: through the user-visible symlinks."""
    return stat.S_IMODE(path.stat().st_mode)


def ts_dirs(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if TS_DIR.match(p.name))


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "vol"
    path.mkdir()
    return path


# --- AtomicWriter ---------------------------------------------------------------------------------
def test_layout_is_the_kubelets(target: Path) -> None:
    assert AtomicWriter(target).write(payload(hostfile="w-0\n", conf__a__b="deep"))
    [ts] = ts_dirs(target)
    assert os.readlink(target / "..data") == ts
    assert os.readlink(target / "hostfile") == "..data/hostfile"
    assert os.readlink(target / "conf") == "..data/conf"
    assert sorted(p.name for p in target.iterdir()) == sorted(["..data", ts, "hostfile", "conf"])
    assert (target / ts / "conf" / "a").is_dir()
    assert not (target / ts / "conf").is_symlink()
    assert (target / "conf" / "a" / "b").read_text() == "deep"
    assert (target / "hostfile").read_text() == "w-0\n"
    assert mode(target / ts) == 0o755
    assert mode(target / ts / "conf" / "a") == 0o755


def test_update_swaps_data_and_drops_the_old_version(target: Path) -> None:
    writer = AtomicWriter(target)
    writer.write(payload(hostfile="w-0\n", gone="x"))
    [old] = ts_dirs(target)
    assert writer.write(payload(hostfile="w-0\nw-1\n", new="y"))
    [new] = ts_dirs(target)
    assert new != old
    assert os.readlink(target / "..data") == new
    assert not (target / old).exists()
    assert not os.path.lexists(target / "..data_tmp")
    assert not os.path.lexists(target / "gone")
    assert (target / "new").read_text() == "y"
    assert (target / "hostfile").read_text() == "w-0\nw-1\n"


def test_nothing_is_written_when_nothing_changed(target: Path) -> None:
    writer = AtomicWriter(target)
    writer.write(payload(a="1", b__c="2"))
    [ts] = ts_dirs(target)
    before = (target / ts / "a").stat().st_mtime_ns
    (
        target / "a"
    ).unlink()  # a lost link is remade even when the data is current (kubernetes#121472)
    assert not writer.write(payload(a="1", b__c="2"))
    assert ts_dirs(target) == [ts]
    assert (target / ts / "a").stat().st_mtime_ns == before
    assert os.readlink(target / "a") == "..data/a"


def test_a_reader_holding_a_file_keeps_reading_the_whole_old_version(target: Path) -> None:
    writer = AtomicWriter(target)
    old = "old line\n" * 10_000
    writer.write(payload(big=old))
    with (target / "big").open() as reader:
        head = reader.read(100)
        writer.write(payload(big="new\n"))
        assert head + reader.read() == old
    assert (target / "big").read_text() == "new\n"


def test_modes_are_exact_whatever_the_umask(target: Path) -> None:
    previous = os.umask(0o077)
    try:
        AtomicWriter(target).write({"x": FileContent(b"", 0o555), "d/y": FileContent(b"", 0o604)})
    finally:
        os.umask(previous)
    assert mode(target / "x") == 0o555
    assert mode(target / "d" / "y") == 0o604
    assert mode(target / "d") == 0o755


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "invalid path: must be relative path: /etc/passwd"),
        ("a/../b", "invalid path: must not contain '..': a/../b"),
        ("..data", "invalid path: must not start with '..': ..data"),
        ("", 'invalid path: must not be empty: ""'),
    ],
)
def test_payload_paths_the_kubelet_refuses(target: Path, path: str, message: str) -> None:
    with pytest.raises(PayloadError, match=re.escape(message)):
        AtomicWriter(target).write({path: FileContent(b"", 0o644)})
    assert list(target.iterdir()) == []


# --- setup / refresh: modes and owners ------------------------------------------------------------
def make_pod(
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]] | None = None,
    *,
    security: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "volumeMounts": mounts or [], **extra}
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u-1",
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {"containers": [container], "volumes": volumes, "securityContext": security or {}},
    }


CONFIG = {"data": {"hostfile": "w-0 slots=1\n", "run.sh": "#!/bin/sh\n"}}
SECRET = {"data": {"id_rsa": "S0VZ"}}  # "KEY"


def lookup(kind: str, name: str) -> dict[str, Any] | None:
    return {"ConfigMap": CONFIG, "Secret": SECRET}.get(kind)


def snapshot(pod: Mapping[str, Any]) -> dict[str, dict[str, FileContent]]:
    out = {}
    for volume in pod["spec"]["volumes"]:
        files = project_volume(volume, lookup, pod)
        if files is not None:
            out[volume["name"]] = files
    return out


def setup(pod: dict[str, Any], pod_dir: Path) -> Path:
    volumefiles.setup(pod, pod_dir, snapshot(pod))
    return pod_dir / "volumes"


def test_configmap_without_fs_group(tmp_path: Path) -> None:
    items = [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
        {"key": "run.sh", "path": "bin/run.sh"},
    ]
    pod = make_pod(
        [{"name": "cfg", "configMap": {"name": "c", "items": items, "defaultMode": 0o555}}]
    )
    vol = setup(pod, tmp_path) / "cfg"
    assert mode(tmp_path / "volumes") == 0o750
    assert mode(vol) == 0o777
    assert mode(vol / "hostfile") == 0o444
    assert mode(vol / "bin" / "run.sh") == 0o555
    assert (vol / "bin" / "run.sh").read_text() == "#!/bin/sh\n"
    if ROOT:
        assert {(p.lstat().st_uid, p.lstat().st_gid) for p in vol.rglob("*")} == {(0, 0)}


@needs_root  # setgid on a group the caller is not in is dropped by the kernel
def test_secret_with_fs_group(tmp_path: Path) -> None:
    pod = make_pod(
        [{"name": "ssh", "secret": {"secretName": "s", "defaultMode": 0o600}}],
        security={"fsGroup": FS_GROUP},
    )
    vol = setup(pod, tmp_path) / "ssh"
    [ts] = ts_dirs(vol)
    # A secret's directory is the kubelet's tmpfs root (1777), plus setgid for the fsGroup.
    assert mode(vol) == 0o3777
    assert mode(vol / ts) == 0o2755
    assert mode(vol / "id_rsa") == 0o640
    assert (vol / "id_rsa").read_bytes() == b"KEY"
    assert {p.lstat().st_gid for p in [vol, *vol.rglob("*")]} == {FS_GROUP}
    assert (vol / ts / "id_rsa").stat().st_uid == 0


def test_secret_without_fs_group_is_world_writable_like_a_tmpfs_root(tmp_path: Path) -> None:
    pod = make_pod([{"name": "ssh", "secret": {"secretName": "s", "defaultMode": 0o600}}])
    vol = setup(pod, tmp_path) / "ssh"
    assert mode(vol) == 0o1777
    assert mode(vol / "id_rsa") == 0o600


@pytest.mark.parametrize(
    ("security", "expected"),
    [({}, 0o777), pytest.param({"fsGroup": FS_GROUP}, 0o2777, marks=needs_root)],
)
def test_empty_dir(tmp_path: Path, security: dict[str, Any], expected: int) -> None:
    pod = make_pod([{"name": "scratch", "emptyDir": {}}], security=security)
    vol = setup(pod, tmp_path) / "scratch"
    assert vol.is_dir()
    assert mode(vol) == expected
    if ROOT:
        assert vol.stat().st_gid == (FS_GROUP if security else 0)


@needs_root
def test_token_is_owned_by_the_pods_user(tmp_path: Path) -> None:
    sources = [{"serviceAccountToken": {"path": "token", "audience": "vault"}}]
    pod = make_pod(
        [{"name": "tok", "projected": {"sources": sources, "defaultMode": 0o644}}],
        security={"runAsUser": 1000, "fsGroup": FS_GROUP},
    )
    vol = setup(pod, tmp_path) / "tok"
    token = (vol / "token").stat()
    assert (token.st_uid, token.st_gid, stat.S_IMODE(token.st_mode)) == (1000, FS_GROUP, 0o640)
    header, claims, _ = (vol / "token").read_text().split(".")
    assert header
    assert claims


def test_refresh_writes_only_changed_volumes_and_keeps_vanished_ones(tmp_path: Path) -> None:
    pod = make_pod(
        [
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "ssh", "secret": {"secretName": "s"}},
        ]
    )
    root = setup(pod, tmp_path)
    files = snapshot(pod)
    files["cfg"] = {**files["cfg"], "hostfile": FileContent(b"w-1 slots=1\n", 0o644)}
    del files["ssh"]
    assert volumefiles.refresh(pod, tmp_path, files) == {"cfg"}
    assert (root / "cfg" / "hostfile").read_text() == "w-1 slots=1\n"
    assert (root / "ssh" / "id_rsa").read_bytes() == b"KEY"
    assert volumefiles.refresh(pod, tmp_path, files) == frozenset()


def test_nested_mount_points_are_made_in_the_parent_volume(tmp_path: Path) -> None:
    mounts = [
        {"name": "cfg", "mountPath": "/etc/cfg"},
        {"name": "scratch", "mountPath": "/etc/cfg/run/x"},
    ]
    pod = make_pod(
        [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "scratch", "emptyDir": {}}], mounts
    )
    vol = setup(pod, tmp_path) / "cfg"
    assert (vol / "run" / "x").is_dir()
    assert not (vol / "run").is_symlink()


def test_setup_refuses_volume_kinds_it_cannot_make(tmp_path: Path) -> None:
    pod = make_pod([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}])
    with pytest.raises(VolumeError, match="not supported"):
        volumefiles.setup(pod, tmp_path)


def test_teardown_removes_read_only_and_foreign_files(tmp_path: Path) -> None:
    pod = make_pod(
        [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "scratch", "emptyDir": {}}]
    )
    root = setup(pod, tmp_path)
    locked = root / "scratch" / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    if ROOT:
        os.chown(locked / "f", 12345, 12345)
        os.chown(locked, 12345, 12345)
    locked.chmod(0o500)
    volumefiles.teardown(tmp_path)
    assert not root.exists()
    volumefiles.teardown(tmp_path)


# --- hostPath -------------------------------------------------------------------------------------
def test_host_path_types(tmp_path: Path) -> None:
    allowed = tmp_path / "host"
    made = allowed / "a" / "b"
    pod = make_pod([{"name": "h", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}}])
    volumefiles.setup(pod, tmp_path / "pod", host_path_root=allowed)
    assert made.is_dir()
    assert mode(made) == 0o755
    outside = make_pod(
        [{"name": "h", "hostPath": {"path": str(tmp_path / "x"), "type": "DirectoryOrCreate"}}]
    )
    with pytest.raises(VolumeError, match="only under"):
        volumefiles.setup(outside, tmp_path / "pod", host_path_root=allowed)
    missing = make_pod(
        [{"name": "h", "hostPath": {"path": str(tmp_path / "nope"), "type": "Directory"}}]
    )
    with pytest.raises(
        VolumeError, match=f"hostPath type check failed: {tmp_path}/nope is not a directory"
    ):
        volumefiles.setup(missing, tmp_path / "pod")


# --- downward API ---------------------------------------------------------------------------------
DOWNWARD_POD: dict[str, Any] = {
    "metadata": {
        "name": "launcher",
        "namespace": "team-a",
        "uid": "6a0f",
        "labels": {"app": "mpi", "role": "launcher"},
        "annotations": {"b.io/x": 'say "hi"\n', "a.io/y": "é\u00a0\t"},
    },
    "spec": {
        "nodeName": "kubesim-node",
        "serviceAccountName": "runner",
        "containers": [
            {
                "name": "main",
                "resources": {"limits": {"cpu": "1500m"}, "requests": {"memory": "1500"}},
            },
        ],
        "initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "250m"}}}],
    },
    "status": {"podIP": "10.244.0.7", "hostIP": "172.18.0.2", "podIPs": [{"ip": "10.244.0.7"}]},
}


def downward(items: list[dict[str, Any]], default_mode: int = 0o644) -> dict[str, FileContent]:
    files = project_volume(
        {"name": "d", "downwardAPI": {"items": items, "defaultMode": default_mode}},
        lookup,
        DOWNWARD_POD,
    )
    assert files is not None
    return files


def test_downward_api_fields_and_modes() -> None:
    items: list[dict[str, Any]] = [
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}, "mode": 0o400},
        {"path": "meta/uid", "fieldRef": {"fieldPath": "metadata.uid"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "role", "fieldRef": {"fieldPath": "metadata.labels['role']"}},
        {"path": "absent", "fieldRef": {"fieldPath": "metadata.annotations['none']"}},
    ]
    files = downward(items, 0o440)
    text = {path: content.data.decode() for path, content in files.items()}
    assert text == {
        "name": "launcher",
        "ns": "team-a",
        "meta/uid": "6a0f",
        "labels": 'app="mpi"\nrole="launcher"',
        "annotations": 'a.io/y="é\\u00a0\\t"\nb.io/x="say \\"hi\\"\\n"',
        "role": "launcher",
        "absent": "",
    }
    assert files["ns"].mode == 0o400
    assert files["name"].mode == 0o440


@pytest.mark.parametrize("path", ["spec.nodeName", "status.podIP", "metadata.generateName"])
def test_a_volume_serves_only_metadata_fields(path: str) -> None:
    with pytest.raises(InvalidSource, match="unsupported fieldPath"):
        downward([{"path": "x", "fieldRef": {"fieldPath": path}}])


@pytest.mark.parametrize(
    ("container", "resource", "divisor", "expected"),
    [
        # The values themselves are kubesim.downward's (tests/unit/kubesim/test_downward.py); these
        # show the wiring.
        ("main", "limits.cpu", "100m", "15"),
        ("main", "limits.memory", None, str(512 * 2**30)),  # unset: the node's allocatable
        ("main", "requests.memory", "1Ki", "2"),  # 1500 bytes, rounded up
        ("setup", "limits.cpu", None, "64"),  # a volume defaults an init container's limits too
    ],
)
def test_resource_field_ref(
    container: str, resource: str, divisor: str | None, expected: str
) -> None:
    ref: dict[str, Any] = {"containerName": container, "resource": resource}
    if divisor is not None:
        ref["divisor"] = divisor
    files = downward([{"path": "v", "resourceFieldRef": ref}])
    assert files["v"].data.decode() == expected


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"resourceFieldRef": {"containerName": "other", "resource": "limits.cpu"}},
            "container other not found",
        ),
        (
            {"resourceFieldRef": {"containerName": "main", "resource": "limits.gpu"}},
            "unsupported container resource : limits.gpu",
        ),
        ({"fieldRef": {"fieldPath": "metadata.labels['-bad-']"}}, "invalid key subscript in"),
        (
            {"fieldRef": {"fieldPath": "metadata.name['x']"}},
            "fieldPath \"metadata.name['x']\" does not support",
        ),
    ],
)
def test_downward_api_items_the_kubelet_cannot_resolve(item: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSource, match=re.escape(message)):
        downward([{"path": "x", **item}])


# --- subPath and the mount plan -------------------------------------------------------------------
def plan(pod: dict[str, Any], root: Path) -> list[Mount]:
    container = pod["spec"]["containers"][0]
    return volumefiles.mount_plan(pod, container, root, env=container_env(pod, container))


@pytest.mark.parametrize(
    ("sub_path", "message"),
    [
        ("/etc", "error SubPath `/etc` must not be an absolute path"),
        ("../escape", "unable to provision SubPath `../escape`: must not contain '..'"),
        ("a/../../b", "unable to provision SubPath `a/../../b`: must not contain '..'"),
    ],
)
def test_sub_paths_leaving_the_volume_are_refused(
    tmp_path: Path, sub_path: str, message: str
) -> None:
    pod = make_pod(
        [{"name": "scratch", "emptyDir": {}}],
        [{"name": "scratch", "mountPath": "/x", "subPath": sub_path}],
    )
    root = setup(pod, tmp_path)
    with pytest.raises(SubPathError, match=re.escape(message)):
        plan(pod, root)


def test_a_symlink_out_of_the_volume_is_refused(tmp_path: Path) -> None:
    mounts = [{"name": "scratch", "mountPath": "/x", "subPath": "link/etc"}]
    pod = make_pod([{"name": "scratch", "emptyDir": {}}], mounts)
    root = setup(pod, tmp_path)
    (root / "scratch" / "link").symlink_to("/")  # what a container could do in its emptyDir
    with pytest.raises(
        SubPathError,
        match='failed to prepare subPath for volumeMount "scratch" of container "main"',
    ) as err:
        volumefiles.prepare_container(pod, pod["spec"]["containers"][0], root, env={})
    assert "outside of allowed base" in err.value.detail


def test_configmap_sub_path_binds_the_file_of_the_current_version(tmp_path: Path) -> None:
    mounts = [{"name": "cfg", "mountPath": "/etc/hostfile", "subPath": "hostfile"}]
    pod = make_pod([{"name": "cfg", "configMap": {"name": "c"}}], mounts)
    root = setup(pod, tmp_path)
    [mount] = plan(pod, root)
    [ts] = ts_dirs(root / "cfg")
    assert mount.source == root / "cfg" / ts / "hostfile"
    assert (mount.target, mount.is_file, mount.read_only) == ("/etc/hostfile", True, True)


@pytest.mark.parametrize(
    ("security", "expected"),
    [({}, 0o777), pytest.param({"fsGroup": FS_GROUP}, 0o2777, marks=needs_root)],
)
def test_missing_sub_path_is_made_with_the_volume_mode(
    tmp_path: Path, security: dict[str, Any], expected: int
) -> None:
    mounts = [{"name": "home", "mountPath": "/root/.ssh", "subPath": "ssh/keys"}]
    pod = make_pod([{"name": "home", "emptyDir": {}}], mounts, security=security)
    root = setup(pod, tmp_path)
    [lexical] = plan(pod, root)
    assert lexical.source == root / "home" / "ssh" / "keys"
    assert not lexical.source.exists()
    [mount] = volumefiles.prepare_container(pod, pod["spec"]["containers"][0], root, env={})
    assert mount.source == root / "home" / "ssh" / "keys"
    assert not mount.is_file
    assert mode(root / "home" / "ssh") == mode(root / "home" / "ssh" / "keys") == expected
    if security:
        # Group inherited through the setgid directories, as on a kubelet's node.
        assert (root / "home" / "ssh" / "keys").stat().st_gid == FS_GROUP


def test_sub_path_expr_expands_the_containers_env(tmp_path: Path) -> None:
    env = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "DIR", "value": "logs-$(POD)"},
    ]
    mounts = [{"name": "scratch", "mountPath": "/logs", "subPathExpr": "$(DIR)/$$x"}]
    pod = make_pod([{"name": "scratch", "emptyDir": {}}], mounts, env=env)
    root = setup(pod, tmp_path)
    [mount] = plan(pod, root)
    assert mount.source == root / "scratch" / "logs-p" / "$x"
    missing = make_pod(
        [{"name": "scratch", "emptyDir": {}}], [{**mounts[0], "subPathExpr": "$(NOPE)"}]
    )
    with pytest.raises(VolumeError, match="missing value for NOPE"):
        plan(missing, root)


def test_mount_plan_order_and_kinds(tmp_path: Path) -> None:
    socket_dir = tmp_path / "run"
    socket_dir.mkdir()
    volumes = [
        {"name": "cfg", "configMap": {"name": "c"}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "data", "emptyDir": {}},
        {"name": "host", "hostPath": {"path": str(socket_dir / "f"), "type": "FileOrCreate"}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "data", "mountPath": "/work/data/cache", "readOnly": True},
        {"name": "cfg", "mountPath": "/work/etc/", "readOnly": False},
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/work"},
        {"name": "host", "mountPath": "/run/f"},
    ]
    pod = make_pod(volumes, mounts, security={"fsGroup": FS_GROUP})
    volumefiles.setup(pod, tmp_path, snapshot(pod), host_path_root=socket_dir)
    root = tmp_path / "volumes"
    got = plan(pod, root)
    assert [m.target for m in got] == [
        "/work",
        "/work/etc",
        "/dev/shm",
        "/run/f",
        "/work/data/cache",
    ]
    by_target = {m.target: m for m in got}
    assert by_target["/work/etc"] == Mount("cfg", "/work/etc", root / "cfg", read_only=True)
    assert by_target["/work/data/cache"] == Mount(
        "data", "/work/data/cache", root / "data", read_only=True
    )
    assert by_target["/run/f"] == Mount(
        "host", "/run/f", socket_dir / "f", read_only=False, is_file=True
    )
    shm = by_target["/dev/shm"]
    assert (shm.source, shm.tmpfs, shm.size) == (None, True, 64 * 2**20)
    assert shm.tmpfs_options() == f"mode=3777,gid={FS_GROUP},size={64 * 2**20}"


def test_tmpfs_size_follows_the_pod_memory_limit() -> None:
    pod = make_pod([], resources={"limits": {"memory": "1Gi"}})
    assert volumefiles.tmpfs_size(pod, {}) == 2**30
    assert volumefiles.tmpfs_size(pod, {"sizeLimit": "2Gi"}) == 2**30
    assert volumefiles.tmpfs_size(make_pod([]), {}) == 512 * 2**30


@pytest.fixture(autouse=True)
def _no_leftover_umask() -> Iterator[None]:
    before = os.umask(0o022)
    os.umask(before)
    yield
    assert os.umask(before) == before


def container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The environment the kubelet resolves for the container (no ConfigMaps or Secrets here)."""
    return dict(kubelet_env(pod, container, lookup=lambda _kind, _name: None).env)
