"""Volumes, users and images of the process runtime, seen from inside real containers.

Every check looks at what a program in the container gets (`stat`, `cat`, `readlink`, `id` run in
it, or the file through `/proc/<container init>/root`, which resolves paths in the container's own
mount namespace and root), never at kubesim's model of it.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kubesim.app import KubeSim
from kubesim.images import ImageCatalog, ImageSpec
from kubesim.procrt.containers import ContainerRun
from kubesim.settings import SimSettings
from kubesim.testing import wait_for

from .procrt_helpers import (
    PROCESS_TIME_SCALE,
    container_status,
    create,
    get_pod,
    log_text,
    phase,
    pod,
    rt,
    shell,
)

IMAGE = "registry.example/volumes-test:1"
"""A stand-in image with its own root directory, entrypoint, cmd, env, working directory and
user."""
MPIUSER = "mpiuser:x:1000:1000::/home/mpiuser:/bin/sh"
ENTRYPOINT = '#!/bin/sh\necho "entrypoint $GREETING $(pwd) $*"\nexec sleep 1000\n'
SLEEP = "sleep 1000"


@pytest.fixture
def volume_sync_seconds() -> float:
    """The kubelet's periodic sync (simulated seconds; 0.2-0.3 s real): short, so that a ConfigMap
    update reaches a whole-volume mount within a test. A test parametrizes it to tell a sync from a
    pod update."""
    return 2.0


@pytest.fixture
def image_root(tmp_path: Path) -> Path:
    root = tmp_path / "image-root"
    (root / "opt").mkdir(parents=True)
    (root / "opt" / "hello.txt").write_text("hello from the image\n")
    (root / "home" / "mpiuser").mkdir(parents=True)
    os.chown(root / "home" / "mpiuser", 1000, 1000)
    entrypoint = root / "entrypoint.sh"
    entrypoint.write_text(ENTRYPOINT)
    entrypoint.chmod(0o755)
    return root


@pytest.fixture
def kubesim_settings(
    process_runtime: None, volume_sync_seconds: float, image_root: Path
) -> SimSettings:
    image = ImageSpec(
        root=image_root,
        entrypoint=("/entrypoint.sh",),
        cmd=("first", "second"),
        env=(("GREETING", "hi"),),
        working_dir="/opt",
        passwd=(MPIUSER,),
        group=("mpiuser:x:1000:",),
    )
    return SimSettings(
        runtime="process",
        time_scale=PROCESS_TIME_SCALE,
        volume_sync_seconds=volume_sync_seconds,
        images=ImageCatalog({IMAGE: image}),
    )


def _run(sim: KubeSim, name: str, container: str = "main") -> ContainerRun:
    kubelet = sim.controllers.kubelet
    assert kubelet is not None
    return kubelet._workers[("default", name)].runs[container]  # type: ignore[attr-defined,no-any-return]


async def _exec(sim: KubeSim, name: str, *argv: str, container: str = "main") -> tuple[int, str]:
    code, out = await _run(sim, name, container).exec(list(argv), 20)
    return code, out.decode()


async def _out(sim: KubeSim, name: str, *argv: str, container: str = "main") -> str:
    """The output of a command that must succeed in the container."""
    code, out = await _exec(sim, name, *argv, container=container)
    assert code == 0, f"{argv}: exit {code}: {out}"
    return out


def _inside(sim: KubeSim, name: str, path: str, container: str = "main") -> str | None:
    """`path` as the running container sees it now (None if absent), read synchronously for
    wait_for."""
    try:
        return Path(f"/proc/{_run(sim, name, container).pid1}/root{path}").read_text()
    except (FileNotFoundError, KeyError):
        return None


async def _running(sim: KubeSim, *names: str) -> None:
    for name in names:

        def running(name: str = name) -> bool:
            return bool(container_status(sim, name).get("state", {}).get("running"))

        await wait_for(sim, running)


async def _refused(sim: KubeSim, name: str, why: str, *argv: str) -> None:
    """`argv` fails in the container, with `why` (the strerror) in its output."""
    code, out = await _exec(sim, name, *argv)
    assert code != 0, out
    assert why in out


def _machine_file(path: str) -> str | None:
    """A file of the machine itself (outside every container), None if it has none."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "data": {k: _b64(v) for k, v in data.items()},
    }


def _update_configmap(sim: KubeSim, name: str, data: dict[str, str]) -> None:
    current = sim.cluster.get(rt(sim, "ConfigMap"), "default", name)
    sim.cluster.update(rt(sim, "ConfigMap"), "default", name, {**current, "data": data})


def _merge_patch_pod(sim: KubeSim, name: str, patch: dict[str, Any]) -> None:
    sim.cluster.patch(
        rt(sim, "Pod"), "default", name, json.dumps(patch).encode(), "application/merge-patch+json"
    )


# --- ConfigMap and Secret volumes -----------------------------------------------------------------
async def test_configmap_and_secret_files_modes_layout_and_decoding(kubesim: KubeSim) -> None:
    create(
        kubesim,
        configmap("settings", {"app.conf": "level=debug\n", "other": "plain\n", "unused": "x"}),
    )
    create(kubesim, secret("creds", {"token": "s3cret-value"}))
    volumes = [
        {
            "name": "settings",
            "configMap": {
                "name": "settings",
                "defaultMode": 0o640,
                "items": [
                    {"key": "app.conf", "path": "nested/dir/app.conf", "mode": 0o600},
                    {"key": "other", "path": "other.txt"},
                ],
            },
        },
        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
    ]
    # No readOnly on either mount: configMap and secret mounts are read-only all the same.
    mounts = [
        {"name": "settings", "mountPath": "/etc/settings"},
        {"name": "creds", "mountPath": "/etc/creds"},
    ]
    create(kubesim, pod("cm", shell("main", SLEEP, volumeMounts=mounts), volumes=volumes))
    await _running(kubesim, "cm")

    stat = ["stat", "-L", "-c", "%a %U %G"]
    assert (
        await _out(kubesim, "cm", *stat, "/etc/settings/nested/dir/app.conf") == "600 root root\n"
    )
    assert await _out(kubesim, "cm", *stat, "/etc/settings/other.txt") == "640 root root\n"
    assert await _out(kubesim, "cm", *stat, "/etc/creds/token") == "400 root root\n"
    assert await _out(kubesim, "cm", "cat", "/etc/settings/nested/dir/app.conf") == "level=debug\n"
    # A Secret's data is base64 in the API and plain in the file.
    assert await _out(kubesim, "cm", "cat", "/etc/creds/token") == "s3cret-value"

    # The AtomicWriter layout: a timestamped payload directory, `..data` pointing at it, and one
    # link per top-level entry through `..data`; keys left out of `items` are not there.
    entries = (await _out(kubesim, "cm", "ls", "-A", "/etc/settings")).split()
    data_target = (await _out(kubesim, "cm", "readlink", "/etc/settings/..data")).strip()
    assert data_target.startswith("..")
    assert data_target != "..data"
    assert sorted(entries) == sorted(["..data", data_target, "nested", "other.txt"])
    assert (
        await _out(kubesim, "cm", "readlink", "/etc/settings/other.txt")
    ).strip() == "..data/other.txt"
    assert (
        await _out(kubesim, "cm", "readlink", "/etc/settings/nested")
    ).strip() == "..data/nested"
    assert (
        await _out(kubesim, "cm", "stat", "-c", "%F", "/etc/settings/nested/dir")
    ).strip() == "directory"
    # The volume roots: an emptyDir on disk (0777) for a configMap, a tmpfs root (1777) for a
    # secret.
    assert (
        await _out(kubesim, "cm", "stat", "-c", "%a %U", "/etc/settings", "/etc/creds")
        == "777 root\n1777 root\n"
    )

    # Read-only though the pod did not ask: even root gets EROFS.
    for path in ("/etc/settings/new", "/etc/creds/token"):
        await _refused(kubesim, "cm", "Read-only file system", "sh", "-c", f"echo x > {path}")
    assert await _out(kubesim, "cm", "cat", "/etc/creds/token") == "s3cret-value"


async def test_fs_group_lets_a_non_root_user_read_a_secret_through_the_group(
    kubesim: KubeSim,
) -> None:
    create(kubesim, secret("key", {"id_rsa": "PRIVATE KEY"}))
    volumes = [
        # 0400: only the owner (root) may read, unless the kubelet adds the group bits for an
        # fsGroup.
        {"name": "key", "secret": {"secretName": "key", "defaultMode": 0o400}},
        {"name": "scratch", "emptyDir": {}},
    ]
    mounts = [{"name": "key", "mountPath": "/keys"}, {"name": "scratch", "mountPath": "/scratch"}]
    user = {"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000]}
    create(
        kubesim,
        pod(
            "with-fsgroup",
            shell("main", SLEEP, volumeMounts=mounts),
            volumes=volumes,
            securityContext={**user, "fsGroup": 2000},
        ),
    )
    create(
        kubesim,
        pod(
            "without",
            shell("main", SLEEP, volumeMounts=mounts),
            volumes=volumes,
            securityContext=user,
        ),
    )
    await _running(kubesim, "with-fsgroup", "without")

    # The ids the processes run with: runAsUser, runAsGroup, and fsGroup + supplementalGroups as
    # extra groups.
    assert await _out(kubesim, "with-fsgroup", "id", "-u") == "1000\n"
    assert await _out(kubesim, "with-fsgroup", "id", "-g") == "3000\n"
    assert set((await _out(kubesim, "with-fsgroup", "id", "-G")).split()) == {
        "2000",
        "3000",
        "4000",
    }
    assert set((await _out(kubesim, "without", "id", "-G")).split()) == {"3000", "4000"}

    # fsGroup: group-owned by it, group-readable (0400 -> 0440), and so readable by the non-root
    # user. Numeric ids: the groups have no names in the container's /etc/group.
    stat = ["stat", "-L", "-c", "%a %u %g"]
    assert await _out(kubesim, "with-fsgroup", *stat, "/keys/id_rsa") == "440 0 2000\n"
    assert await _out(kubesim, "with-fsgroup", "cat", "/keys/id_rsa") == "PRIVATE KEY"
    # Directories of the volume get the setgid bit; the payload directory the group's search bit.
    assert (
        await _out(kubesim, "with-fsgroup", "stat", "-c", "%a %g", "/keys")
    ).strip() == "3777 2000"
    assert (
        await _out(kubesim, "with-fsgroup", "stat", "-L", "-c", "%a %g", "/keys/..data")
    ).strip() == "2755 2000"
    # Without fsGroup the mode stays as asked and the user cannot read its own key.
    assert await _out(kubesim, "without", *stat, "/keys/id_rsa") == "400 0 0\n"
    await _refused(kubesim, "without", "Permission denied", "cat", "/keys/id_rsa")

    # emptyDir: writable by the non-root user; with fsGroup setgid, so new files belong to the
    # group.
    assert (
        await _out(kubesim, "with-fsgroup", "stat", "-c", "%a %g", "/scratch")
    ).strip() == "2777 2000"
    assert (await _out(kubesim, "without", "stat", "-c", "%a %g", "/scratch")).strip() == "777 0"
    for name, group in (("with-fsgroup", "2000"), ("without", "3000")):
        await _out(kubesim, name, "sh", "-c", "echo mine > /scratch/file")
        assert (
            await _out(kubesim, name, "stat", "-c", "%u %g", "/scratch/file")
        ).strip() == f"1000 {group}"


async def test_read_only_mounts_refuse_writes_that_a_writable_mount_of_the_same_volume_takes(
    kubesim: KubeSim,
) -> None:
    mounts = [
        {"name": "shared", "mountPath": "/rw"},
        {"name": "shared", "mountPath": "/ro", "readOnly": True},
    ]
    create(
        kubesim,
        pod(
            "ro",
            shell("main", SLEEP, volumeMounts=mounts),
            volumes=[{"name": "shared", "emptyDir": {}}],
        ),
    )
    await _running(kubesim, "ro")
    await _refused(kubesim, "ro", "Read-only file system", "touch", "/ro/file")
    await _out(kubesim, "ro", "sh", "-c", "echo written > /rw/file")
    assert await _out(kubesim, "ro", "cat", "/ro/file") == "written\n"
    options = {
        line.split()[1]: line.split()[3].split(",")
        for line in (await _out(kubesim, "ro", "cat", "/proc/mounts")).splitlines()
    }
    assert "ro" in options["/ro"]
    assert "rw" in options["/rw"]


async def test_memory_empty_dir_is_one_tmpfs_shared_by_init_and_main_containers(
    kubesim: KubeSim,
) -> None:
    # What the operator's ssh-auth-setup init container does: writes keys into a memory emptyDir
    # that the main container (sshd) mounts, partly through a subPath.
    init = shell(
        "setup",
        "mkdir /keys/ssh && echo ssh-ed25519 AAAA > /keys/ssh/authorized_keys && echo top > "
        "/keys/top"
        " && stat -f -c %T /keys > /keys/fs-seen-by-init",
        volumeMounts=[{"name": "keys", "mountPath": "/keys"}],
    )
    main = shell(
        "main",
        SLEEP,
        volumeMounts=[
            {"name": "keys", "mountPath": "/keys"},
            {"name": "keys", "mountPath": "/home/user/.ssh", "subPath": "ssh", "readOnly": True},
            # A subPath nothing made yet: the kubelet creates it (as a directory) before the mount.
            {"name": "keys", "mountPath": "/made", "subPath": "made/by/kubelet"},
        ],
    )
    create(
        kubesim,
        pod(
            "mem",
            main,
            initContainers=[init],
            volumes=[{"name": "keys", "emptyDir": {"medium": "Memory"}}],
        ),
    )
    await _running(kubesim, "mem")
    init_status = get_pod(kubesim, "mem")["status"]["initContainerStatuses"][0]
    assert init_status["state"]["terminated"]["exitCode"] == 0
    assert await _out(kubesim, "mem", "cat", "/keys/fs-seen-by-init") == "tmpfs\n"

    assert (await _out(kubesim, "mem", "stat", "-f", "-c", "%T", "/keys")).strip() == "tmpfs"
    mounts = await _out(kubesim, "mem", "cat", "/proc/mounts")
    assert any(line.split()[1:3] == ["/keys", "tmpfs"] for line in mounts.splitlines()), mounts
    assert await _out(kubesim, "mem", "cat", "/keys/top") == "top\n"
    assert (
        await _out(kubesim, "mem", "cat", "/home/user/.ssh/authorized_keys") == "ssh-ed25519 AAAA\n"
    )
    assert (await _out(kubesim, "mem", "ls", "/home/user/.ssh")).split() == ["authorized_keys"]
    await _refused(kubesim, "mem", "Read-only file system", "touch", "/home/user/.ssh/other")
    # The subPath mount is the same tmpfs: a write through the full mount shows there at once.
    await _out(kubesim, "mem", "sh", "-c", "echo later > /keys/ssh/known_hosts")
    assert await _out(kubesim, "mem", "cat", "/home/user/.ssh/known_hosts") == "later\n"
    await _out(kubesim, "mem", "sh", "-c", "echo via-subpath > /made/file")
    # Made with the volume root's mode (a tmpfs root: 1777), as the kubelet's SafeMakeDir does.
    assert (
        await _out(kubesim, "mem", "stat", "-c", "%a", "/keys/made", "/keys/made/by/kubelet")
        == "1777\n1777\n"
    )
    assert await _out(kubesim, "mem", "cat", "/keys/made/by/kubelet/file") == "via-subpath\n"

    # The tmpfs lives in the pod's mount namespaces only: the machine sees an empty mount point.
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    on_machine = kubelet.pod_dir(kubelet._workers[("default", "mem")]) / "volumes" / "keys"  # type: ignore[attr-defined]
    assert _listing(on_machine) == []


# --- updates: subPath vs whole volume, pod updates, downward API ----------------------------------
async def test_configmap_update_reaches_the_volume_at_the_sync_but_never_a_sub_path(
    kubesim: KubeSim,
) -> None:
    create(kubesim, configmap("conf", {"app.conf": "version 1\n"}))
    mounts = [
        {"name": "conf", "mountPath": "/etc/whole"},
        {"name": "conf", "mountPath": "/etc/single/app.conf", "subPath": "app.conf"},
    ]
    volumes = [{"name": "conf", "configMap": {"name": "conf"}}]
    create(kubesim, pod("sub", shell("main", SLEEP, volumeMounts=mounts), volumes=volumes))
    await _running(kubesim, "sub")
    # The subPath is a single file at its path, not a directory with the volume's layout.
    assert (
        await _out(kubesim, "sub", "stat", "-c", "%F", "/etc/single/app.conf")
    ).strip() == "regular file"
    assert (await _out(kubesim, "sub", "ls", "-A", "/etc/single")).split() == ["app.conf"]
    assert await _out(kubesim, "sub", "cat", "/etc/single/app.conf") == "version 1\n"
    before = await _out(kubesim, "sub", "readlink", "/etc/whole/..data")

    _update_configmap(kubesim, "conf", {"app.conf": "version 2\n"})
    # Nothing but the kubelet's periodic sync (volume_sync_seconds) brings it to the whole-volume
    # mount.
    await wait_for(kubesim, lambda: _inside(kubesim, "sub", "/etc/whole/app.conf") == "version 2\n")
    assert await _out(kubesim, "sub", "cat", "/etc/whole/app.conf") == "version 2\n"
    assert await _out(kubesim, "sub", "readlink", "/etc/whole/..data") != before
    # The subPath was bound to the file of the container's start, which the update replaced, not
    # changed.
    assert await _out(kubesim, "sub", "cat", "/etc/single/app.conf") == "version 1\n"


@pytest.mark.parametrize("volume_sync_seconds", [3600.0])
async def test_a_pod_update_refreshes_its_volumes_at_once(kubesim: KubeSim) -> None:
    create(kubesim, configmap("conf", {"key": "old"}))
    volumes = [{"name": "conf", "configMap": {"name": "conf"}}]
    create(
        kubesim,
        pod(
            "upd",
            shell("main", SLEEP, volumeMounts=[{"name": "conf", "mountPath": "/conf"}]),
            volumes=volumes,
        ),
    )
    await _running(kubesim, "upd")
    before = await _out(kubesim, "upd", "readlink", "/conf/..data")
    _update_configmap(kubesim, "conf", {"key": "new"})
    # The kubelet does not watch ConfigMaps, and its periodic sync is an hour away.
    assert await _out(kubesim, "upd", "cat", "/conf/key") == "old"
    _merge_patch_pod(kubesim, "upd", {"metadata": {"annotations": {"touched": "now"}}})
    await wait_for(kubesim, lambda: _inside(kubesim, "upd", "/conf/key") == "new", within=10)
    assert await _out(kubesim, "upd", "cat", "/conf/key") == "new"
    after = await _out(kubesim, "upd", "readlink", "/conf/..data")
    assert after != before
    assert after.startswith("..")


async def test_downward_api_volume_follows_the_pod_labels(kubesim: KubeSim) -> None:
    items = [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "meta/name", "fieldRef": {"fieldPath": "metadata.name"}},
    ]
    spec = pod(
        "dapi",
        shell("main", SLEEP, volumeMounts=[{"name": "info", "mountPath": "/etc/podinfo"}]),
        volumes=[{"name": "info", "downwardAPI": {"items": items}}],
        labels={"app": "dapi", "tier": "backend"},
    )
    spec["metadata"]["annotations"] = {"note": 'say "hi"'}
    create(kubesim, spec)
    await _running(kubesim, "dapi")
    assert await _out(kubesim, "dapi", "cat", "/etc/podinfo/meta/name") == "dapi"
    assert await _out(kubesim, "dapi", "cat", "/etc/podinfo/labels") == 'app="dapi"\ntier="backend"'
    assert await _out(kubesim, "dapi", "cat", "/etc/podinfo/annotations") == 'note="say \\"hi\\""'

    _merge_patch_pod(kubesim, "dapi", {"metadata": {"labels": {"tier": "frontend", "extra": "1"}}})
    want = 'app="dapi"\nextra="1"\ntier="frontend"'
    await wait_for(
        kubesim, lambda: _inside(kubesim, "dapi", "/etc/podinfo/labels") == want, within=10
    )
    assert await _out(kubesim, "dapi", "cat", "/etc/podinfo/labels") == want


# --- users and images -----------------------------------------------------------------------------
async def test_image_root_entrypoint_env_workdir_and_passwd(kubesim: KubeSim) -> None:
    machine_passwd = _machine_file("/etc/passwd")
    assert machine_passwd is not None
    container = {
        "name": "main",
        "image": IMAGE,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
    }
    create(kubesim, pod("img", container))
    await _running(kubesim, "img")
    # No command in the pod: the image's entrypoint with its cmd, in its working directory and env.
    await wait_for(kubesim, lambda: "entrypoint" in log_text(kubesim, "img"))
    assert log_text(kubesim, "img") == "entrypoint hi /opt first second\n"

    assert await _out(kubesim, "img", "cat", "/opt/hello.txt") == "hello from the image\n"
    assert await _out(kubesim, "img", "id", "-un") == "mpiuser\n"
    assert (
        await _out(kubesim, "img", "sh", "-c", 'echo "$HOME $GREETING $(pwd)"')
        == "/home/mpiuser hi /opt\n"
    )
    assert await _out(kubesim, "img", "getent", "passwd", "1000") == MPIUSER + "\n"
    assert await _out(kubesim, "img", "getent", "group", "1000") == "mpiuser:x:1000:\n"
    # The machine keeps its own files: no image file on it, its uid 1000 line unchanged.
    assert _machine_file("/opt/hello.txt") is None
    assert _machine_file("/entrypoint.sh") is None
    assert _machine_file("/etc/passwd") == machine_passwd
    # This machine has a uid 1000 of its own (cloudsdk), which the container's mpiuser line
    # replaced.
    machine_uid_1000 = [
        line for line in machine_passwd.splitlines() if line.split(":")[2:3] == ["1000"]
    ]
    assert MPIUSER not in machine_uid_1000


async def test_run_as_non_root_refuses_uid_0(kubesim: KubeSim) -> None:
    context = {"runAsNonRoot": True, "runAsUser": 0}
    create(kubesim, pod("rootless", shell("main", "echo started", securityContext=context)))
    await wait_for(
        kubesim,
        lambda: (
            container_status(kubesim, "rootless").get("state", {}).get("waiting", {}).get("reason")
            == "CreateContainerConfigError"
        ),
    )
    status = container_status(kubesim, "rootless")
    assert "runAsUser breaks non-root policy" in status["state"]["waiting"]["message"]
    assert status["restartCount"] == 0
    assert not status["lastState"]
    assert phase(kubesim, "rootless") == "Pending"
    kubelet = kubesim.controllers.kubelet
    assert kubelet is not None
    assert "main" not in kubelet._workers[("default", "rootless")].runs  # type: ignore[attr-defined]
    assert log_text(kubesim, "rootless") == ""
